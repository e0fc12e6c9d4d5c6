// The process's descriptor table, grown once when the library loads (and again in a child of
// fork(), which starts with a small table) so that no descriptor a group opens later (the root's
// accepted sockets, a rank's connection, the ipc transport's handles) has to grow it.
//
// Why: Linux grows a process's table by doubling when a new descriptor would pass its end, and
// when several threads share the table it first waits for an RCU grace period (fs/file.c,
// expand_fdtable: synchronize_rcu). That wait took 10-20 ms on the machines measured, and a
// torch process holds some 100-250 descriptors, so a group's first join often crossed a
// boundary: the root's accept() sat in synchronize_rcu for 18 ms while every rank waited for its
// WELCOME (bench/results/2026-12-06-h100-ba). A process usually has one thread while it loads
// its libraries, and a child of fork() has one, and then the growth costs microseconds; a
// process that loads the library while it runs several threads pays one grace period then,
// instead of one in a join for each doubling.
#pragma once
#include <string>

namespace actorcc {

// Slots the table is grown to (or the soft RLIMIT_NOFILE, if lower): 32 KiB of kernel memory
// for the pointers; a root admits a few thousand ranks before the table grows again.
inline constexpr int kFdTableSlots = 4096;

// The last growth (at the library's load, or in this child of fork()) for a debug line: "the
// descriptor table: 4096 slots, grown from 256 at load (1 thread, 0.01 ms)".
std::string fd_table_note();

}  // namespace actorcc
