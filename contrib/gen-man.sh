#!/bin/bash
# Writes docs/man/hipower.7, the manual page of every UCX_HIPOWER_*
# variable, from the transport's own configuration table as this build's
# plugin reports it (ucx_info -c -f under hipower-run): its text, syntax and
# default are the ucs_config_field_t entries of hipower_config.c and
# hipower_md.c, so the page says what the code does, not what someone
# remembered. The page's other sections are below, in this script.
#
# usage: contrib/gen-man.sh [OUTPUT]   (from a built tree; default
#        docs/man/hipower.7)
set -eu -o pipefail
top=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
out=${1:-$top/docs/man/hipower.7}
version=$(sed -n 's/^AC_INIT(\[hipower\], *\[\([^]]*\)\].*/\1/p' "$top/configure.ac")
date=$(git -C "$top" log -1 --format=%cs 2>/dev/null || date +%F)

# The defaults, not this shell's settings
config=$(env $(env | sed -n 's/^\(UCX_[A-Z0-9_]*\)=.*/-u \1/p') \
         HIPOWER_PLUGIN="${HIPOWER_PLUGIN:-$top/.libs/libuct_hipower.so}" \
         "$top/src/ucp_glue/hipower-run" ucx_info -c -f)

{
cat <<EOF
.TH HIPOWER 7 "$date" "hipower $version" "Miscellaneous Information Manual"
.SH NAME
hipower \- the hipower UCX transport and its configuration variables
.SH DESCRIPTION
.B hipower
is a UCT transport of UCX for RDMA devices (InfiniBand, RoCE, Soft-RoCE).
It sends active messages by one RDMA_WRITE each into receive slots the
peer registered in advance: no receive work request and no completion per
message at the receiver, slots given back in batches through bitmaps.
It offers active messages (short, bcopy, zcopy), put and get, 64-bit
atomics, flush, fence, a pending queue, peer-failure detection and an
event file descriptor, so UCP uses it for eager and rendezvous traffic.
.PP
The plugin is loaded by
.BR hipower-run (1)
(by
.B LD_PRELOAD
on UCX 1.13 to 1.21,
.B UCX_PLUGIN_PATH
on UCX 1.22 and later) and chosen by
.BR UCX_TLS ,
e.g.
.BR UCX_TLS=hipower,self .
Both peers of a connection must load it, with the same
.BR UCX_HIPOWER_SLOT_SIZE ,
.B UCX_HIPOWER_NOTIFY
and
.BR UCX_HIPOWER_CONNECT_TO_IFACE .
.BR hipower-lanes (1)
shows which transport UCP chose.
.SH ENVIRONMENT
Every variable below is read when an interface or memory domain opens.
A value out of its range makes the open fail with a message that names
the device and the variable.
This list is generated from the transport's configuration table
.RB ( "hipower-run ucx_info \-c \-f" ,
which also prints the values in effect);
a variable that
.I inherits
another takes that one's value unless set itself.
EOF
printf '%s\n' "$config" | python3 -c '
import re, sys

def roff(text):
    text = text.replace("\\", "\\e").replace("-", "\\-")
    return "\\&" + text if text[:1] in (".", "\x27") else text

comments = []
for line in sys.stdin.read().splitlines():
    if line.startswith("#"):
        comments.append(line[1:].strip())
        continue
    m = re.match(r"^(UCX_HIPOWER_[A-Z0-9_]+)=(.*)$", line)
    if not m:
        comments = []
        continue
    name, value = m.groups()
    text, syntax, inherits = [], None, None
    for c in comments:
        if c.startswith("syntax:"):
            syntax = c[len("syntax:"):].strip()
        elif c.startswith("inherits:"):
            inherits = c[len("inherits:"):].strip()
        else:
            text.append(c)
    paragraphs, cur = [], []
    for t in text:
        if t:
            cur.append(t)
        elif cur:
            paragraphs.append(cur)
            cur = []
    if cur:
        paragraphs.append(cur)
    print(".TP")
    print(".B %s" % name)
    print("Default:")
    print(".BR \"%s\" ." % roff(value if value else "(empty)"))
    if inherits:
        print("Inherits")
        print(".BR %s ." % roff(inherits))
    for i, p in enumerate(paragraphs):
        if i > 0:
            print(".IP")
        for j, t in enumerate(p):
            # A list of values, one per line ("try - ..."): kept so
            if (j > 0) and re.match(r"^\S+\s+-\s", t):
                print(".br")
            print(roff(t))
    if syntax:
        print(".IP")
        print("Syntax: " + roff(syntax) + ".")
    comments = []
'
cat <<'EOF'
.SH COUNTERS
With
.B UCX_HIPOWER_STATS=y
each interface prints one line at close,
.BR "hipower\-stats DEVICE:PORT: name=value ..." :
messages and bytes each way, RDMA writes and reads, completions (the
receiver's stay near zero), slots given back per bitmap read, bundles
and the messages they carried, and the counters of the bundle window
.RB ( tx_window ,
.BR tx_cq_events ,
.BR hold_timer_posts ).
.SH FILES
.TP
.I libuct_hipower.so
The plugin, in UCX's module directory (also as
.IR libuct_hipower.so.0 ,
the name UCX 1.22 and later look for).
.SH SEE ALSO
.BR hipower\-run (1),
.BR hipower\-lanes (1),
.BR ucx_info (1),
.BR ucx_perftest (1).
The protocol:
.I docs/protocol.md
in the documentation.
EOF
} > "$out.tmp"
mv "$out.tmp" "$out"
echo "$out: $(grep -c '^\.B UCX_HIPOWER_' "$out") variables"
