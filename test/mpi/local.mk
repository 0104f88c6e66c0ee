# MPI consumer programs (included from Makefile.am)
