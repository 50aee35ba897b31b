// tune --crowd N [--procs P] (tune_crowd.cpp).
#pragma once

// `self`: this program's path (the processes are started from it); `child`: this is one of them.
int crowd_main(int threads, int procs, bool child, const char* self);
