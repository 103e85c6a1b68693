// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 kvtier authors
// The GPU tests run on a machine lent for minutes, without gdb and with their output piped: a test
// that crashes there must say where by itself. At start this makes stdout unbuffered (a seed
// printed before a crash is not lost in the pipe's buffer) and, on a fatal signal, writes the
// signal and the stack (backtrace(3): frames as offsets into the executable, which
// bench/gpu/h200_common.sh turns into function names with addr2line) to stderr, then dies of the
// same signal so that ctest sees the crash as it was.
#include <execinfo.h>
#include <signal.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <initializer_list>

namespace {

void report(int sig) {
  // The process is dying: write(2) and backtrace (loaded before any signal, below) do the work;
  // strsignal only reads a table.
  const char* name = strsignal(sig);
  (void)!write(STDERR_FILENO, "\n*** fatal signal: ", 19);
  (void)!write(STDERR_FILENO, name, strlen(name));
  (void)!write(STDERR_FILENO, "; stack:\n", 9);
  void* frames[64];
  const int n = backtrace(frames, 64);
  backtrace_symbols_fd(frames, n, STDERR_FILENO);
  signal(sig, SIG_DFL);
  raise(sig);
}

[[maybe_unused]] const bool installed = [] {
  std::setvbuf(stdout, nullptr, _IONBF, 0);
  // backtrace() loads libgcc on its first call, which a signal handler must not be the one to do.
  void* warm[1];
  (void)backtrace(warm, 1);
  for (int sig : {SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGABRT}) {
    struct sigaction sa {};
    sa.sa_handler = report;
    sa.sa_flags = SA_RESETHAND;
    sigaction(sig, &sa, nullptr);
  }
  return true;
}();

}  // namespace
