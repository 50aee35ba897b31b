#include "kaio/cache/fault_guard.h"

#include <setjmp.h>
#include <signal.h>
#include <unistd.h>

#include <cstring>
#include <mutex>

namespace kaio::cache::detail {

namespace {

// A plain pointer: readable from a signal handler without any initialisation code.
thread_local sigjmp_buf* t_jump = nullptr;
struct sigaction g_previous_bus, g_previous_segv;

void on_fault(int sig, siginfo_t* info, void* uctx) {
  if (sigjmp_buf* j = t_jump) {
    t_jump = nullptr;
    siglongjmp(*j, sig);
  }
  // Not ours: behave as if this handler did not exist.
  const struct sigaction& prev = sig == SIGBUS ? g_previous_bus : g_previous_segv;
  if ((prev.sa_flags & SA_SIGINFO) && prev.sa_sigaction) {
    prev.sa_sigaction(sig, info, uctx);
    return;
  }
  if (!(prev.sa_flags & SA_SIGINFO) && prev.sa_handler != SIG_DFL && prev.sa_handler != SIG_IGN) {
    prev.sa_handler(sig);
    return;
  }
  // The default action: returning re-runs the faulting access, which now kills the
  // process with the signal, as it would have without kaio.
  struct sigaction dfl;
  std::memset(&dfl, 0, sizeof dfl);
  dfl.sa_handler = SIG_DFL;
  sigaction(sig, &dfl, nullptr);
}

}  // namespace

void install_fault_handler() {
  static std::once_flag once;
  std::call_once(once, [] {
    struct sigaction sa;
    std::memset(&sa, 0, sizeof sa);
    sa.sa_sigaction = on_fault;
    // SA_NODEFER: the signal is not blocked while the handler runs, so jumping out of it
    // needs no saved signal mask (sigsetjmp(.., 0) below: no system call per guarded
    // call). SA_ONSTACK: an application's alternate signal stack (for stack overflows)
    // still serves the faults we pass on.
    sa.sa_flags = SA_SIGINFO | SA_NODEFER | SA_ONSTACK;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGBUS, &sa, &g_previous_bus);
    sigaction(SIGSEGV, &sa, &g_previous_segv);
  });
}

bool run_guarded(void (*fn)(void*), void* ctx) noexcept {
  sigjmp_buf jump;
  sigjmp_buf* const outer = t_jump;  // guarded calls may nest
  // savemask = 0: see SA_NODEFER above; the disk-hit path runs three guarded calls.
  if (sigsetjmp(jump, 0) != 0) {
    t_jump = outer;
    return false;
  }
  t_jump = &jump;
  fn(ctx);
  t_jump = outer;
  return true;
}

void touch(const void* p, size_t n) noexcept {
  if (!n) return;
  static const size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
  const auto* b = static_cast<const volatile unsigned char*>(p);
  for (size_t at = 0; at < n; at += page) (void)b[at];
  (void)b[n - 1];
}

}  // namespace kaio::cache::detail
