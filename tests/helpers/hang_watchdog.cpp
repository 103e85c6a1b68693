// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 kvtier authors
// A test still running after KVTIER_TEST_HANG_S seconds (600 unless set; the cluster tests set it
// under ctest's limit for them) has every thread's stack printed by gdb, then the process aborts.
// Killed by ctest's timeout instead, a hang leaves only the test's name: not even its seed, which
// sits in a stdout buffer never flushed.
//
// The watcher is a process of its own, forked before the first test while the test process has
// one thread, and told of each test's start and end through a socket. A thread would make every
// later fork of a test a fork of a multi-threaded process, which TSan refuses to let start
// threads (death tests and the fault tests run the engine in such children).
#include <gtest/gtest.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <thread>
#include <vector>

namespace {

using Clock = std::chrono::steady_clock;

std::chrono::seconds hang_limit() {
  const char* env = std::getenv("KVTIER_TEST_HANG_S");
  const long s = env != nullptr ? std::strtol(env, nullptr, 10) : 0;
  return std::chrono::seconds(s > 0 ? s : 600);
}

/// Prints every thread's stack of process `pid` to stderr through gdb, waiting at most `limit` for
/// it.
void print_stacks(pid_t pid, std::chrono::seconds limit) {
  const std::string id = std::to_string(pid);
  const char* const argv[] = {
      "gdb", "-p", id.c_str(), "-batch", "-nx", "-ex", "thread apply all bt", nullptr};
  static const char kNoGdb[] = "hang watchdog: gdb could not be run (tools/setup.sh installs it)\n";
  const pid_t child = fork();
  if (child == 0) {
    dup2(STDERR_FILENO, STDOUT_FILENO);
    execvp(argv[0], const_cast<char* const*>(argv));
    [[maybe_unused]] const ssize_t said = write(STDERR_FILENO, kNoGdb, sizeof kNoGdb - 1);
    _exit(127);
  }
  if (child < 0) return;
  const auto deadline = Clock::now() + limit;
  while (waitpid(child, nullptr, WNOHANG) == 0) {
    if (Clock::now() > deadline) {
      kill(child, SIGKILL);
      waitpid(child, nullptr, 0);
      return;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
}

/// The processes `pid` started that still run, but `except` (a tool the test waits for may be
/// what hangs).
std::vector<pid_t> children_of(pid_t pid, pid_t except) {
  std::vector<pid_t> out;
  std::error_code ec;
  const std::string tasks = "/proc/" + std::to_string(pid) + "/task";
  for (const auto& task : std::filesystem::directory_iterator(tasks, ec)) {
    std::ifstream list(task.path() / "children");
    for (pid_t child; list >> child;) {
      if (child != except) out.push_back(child);
    }
  }
  return out;
}

std::string command_line(pid_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/cmdline");
  std::string line((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  std::replace(line.begin(), line.end(), '\0', ' ');
  line.erase(line.find_last_not_of(' ') + 1);  // redis-server pads the title it sets
  return line;
}

/// The watcher process: reads "S<name>\n" (a test started) and "E\n" (it ended) from `in`; a test
/// running past `limit` has its process's stacks printed and is sent SIGABRT. Ends when the test
/// process closes its end (it ended).
[[noreturn]] void watch(int in, pid_t tests, std::chrono::seconds limit) {
  std::string pending, name;
  bool running = false;
  Clock::time_point deadline;
  for (;;) {
    int timeout = -1;
    if (running) {
      const auto left =
          std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
      timeout = static_cast<int>(std::max<int64_t>(0, left.count()));
    }
    pollfd readable{in, POLLIN, 0};
    const int ready = poll(&readable, 1, timeout);
    if (ready < 0 && errno == EINTR) continue;
    if (ready > 0) {
      char buffer[512];
      const ssize_t n = read(in, buffer, sizeof buffer);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) _exit(0);
      pending.append(buffer, static_cast<size_t>(n));
      for (size_t end; (end = pending.find('\n')) != std::string::npos;) {
        running = pending[0] == 'S';
        if (running) {
          name = pending.substr(1, end - 1);
          deadline = Clock::now() + limit;
        }
        pending.erase(0, end + 1);
      }
      continue;
    }
    if (!running || Clock::now() < deadline) continue;
    std::fprintf(stderr, "\nhang watchdog: %s still runs after %lld s; every thread's stack:\n",
                 name.c_str(), static_cast<long long>(limit.count()));
    std::fflush(stderr);
    print_stacks(tests, std::chrono::seconds(10));
    // The servers a test started wait for requests by design; a tool or helper may be stuck.
    for (const pid_t child : children_of(tests, getpid())) {
      const std::string command = command_line(child);
      std::fprintf(stderr, "\nhang watchdog: child process %d: %s\n", static_cast<int>(child),
                   command.c_str());
      std::fflush(stderr);
      if (command.rfind("redis-server", 0) != 0) print_stacks(child, std::chrono::seconds(5));
    }
    kill(tests, SIGABRT);
    _exit(0);
  }
}

class HangWatchdog final : public ::testing::EmptyTestEventListener {
 public:
  void OnTestProgramStart(const ::testing::UnitTest&) override {
    // A socket, not a pipe: a write to a watcher that is gone fails (MSG_NOSIGNAL) instead of
    // raising SIGPIPE in the test process.
    int fds[2];
    if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, fds) != 0) return;
    const pid_t tests = getpid();
    const std::chrono::seconds limit = hang_limit();
    std::fflush(nullptr);  // else a child that flushes at its exit (TSan's does) repeats the output
    const pid_t watcher = fork();
    if (watcher == 0) {
      close(fds[1]);
      watch(fds[0], tests, limit);
    }
    close(fds[0]);
    if (watcher < 0) {
      close(fds[1]);
      return;
    }
    // Where Yama lets a process be traced by its ancestors only, the watcher's gdb may trace it.
    prctl(PR_SET_PTRACER, watcher, 0, 0, 0);
    out_ = fds[1];
  }
  void OnTestStart(const ::testing::TestInfo& test) override {
    std::fflush(stdout);
    tell("S" + std::string(test.test_suite_name()) + "." + test.name() + "\n");
  }
  void OnTestEnd(const ::testing::TestInfo&) override { tell("E\n"); }

 private:
  void tell(const std::string& line) const {
    if (out_ < 0) return;
    // Short lines go whole; a watcher that is gone costs nothing more.
    [[maybe_unused]] const ssize_t put = send(out_, line.data(), line.size(), MSG_NOSIGNAL);
  }

  int out_ = -1;
};

// gtest_main's main() runs every test after static initialisation: the listener is in place.
[[maybe_unused]] const bool registered = [] {
  ::testing::UnitTest::GetInstance()->listeners().Append(new HangWatchdog);
  return true;
}();

}  // namespace
