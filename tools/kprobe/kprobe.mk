# Build rules for the kprobe CLI (build/kprobe) and its agent; included by
# the top-level Makefile.
