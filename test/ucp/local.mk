# UCP consumer programs (included from Makefile.am)
