import sys, statistics as st, collections
d=collections.defaultdict(list); a=collections.defaultdict(list)
for l in open(sys.argv[1]):
    if not l.startswith('rep='): continue
    p=l.split(); size=p[1].split('=')[1]; col=p[2].split('=')[1]
    try: d[(size,col)].append(float(p[5])); a[(size,col)].append(float(p[6]))
    except: pass
sizes=sorted({k[0] for k in d}, key=int); cols=[]
for k in d:
    if k[1] not in cols: cols.append(k[1])
for s in sizes:
    base=st.median(d[(s,'rc_verbs')]); bmin=min(d[(s,'rc_verbs')]); bav=st.median(a[(s,'rc_verbs')])
    for c in cols:
        v=d[(s,c)]
        print(f"{s:>5} {c:<16} n={len(v):2} median {st.median(v):7.1f} ({st.median(v)/base:.3f}x)  min {min(v):7.1f} ({min(v)/bmin:.3f}x)  avg-median {st.median(a[(s,c)]):7.1f} ({st.median(a[(s,c)])/bav:.3f}x)")
