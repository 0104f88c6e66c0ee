# UCP glue programs (included from Makefile.am)
