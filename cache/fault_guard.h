// Turns a SIGBUS or SIGSEGV raised while LMDB (or kaio) reads the mapped cache file into an
// error code, so that a damaged file costs a cache miss instead of the process.
//
// Why: LMDB maps data.mdb and follows the page numbers and sizes it finds there. The meta
// check before opening (cache/lmdb_file.h) catches a file cut short, but damage inside a
// page, or a file truncated by someone else while it is open, can still send a read past
// the end of the file (SIGBUS) or of the map (SIGSEGV). Java's MappedByteBuffer does the
// same for the same reason.
//
// How: a process-wide handler for SIGBUS and SIGSEGV. A thread inside run_guarded() has a
// jump buffer; a fault on that thread jumps back to it. Any other fault goes to the
// handler that was installed before (or the default action): kaio never hides a crash
// outside its own guarded reads. The guarded function must not own objects with
// destructors (the stack between the jump buffer and the fault is discarded): it calls
// LMDB (C) and touches memory, nothing else.
#pragma once

#include <cstddef>

namespace kaio::cache::detail {

// Installs the handler (once per process; later calls do nothing).
void install_fault_handler();

// Runs fn(ctx); returns false when a SIGBUS or SIGSEGV on this thread cut it short.
bool run_guarded(void (*fn)(void*), void* ctx) noexcept;

// Reads one byte of every page of [p, p + n), so that a value handed to a caller is known
// to be readable (a fault here is caught when called inside run_guarded).
void touch(const void* p, size_t n) noexcept;

// Runs f() (returning int) guarded; `on_fault` is returned when a fault cut it short.
template <class F>
int guarded(F&& f, int on_fault) noexcept {
  struct Ctx {
    F* f;
    int rc;
  } ctx{&f, on_fault};
  if (!run_guarded([](void* p) { auto* c = static_cast<Ctx*>(p); c->rc = (*c->f)(); }, &ctx)) return on_fault;
  return ctx.rc;
}

}  // namespace kaio::cache::detail
