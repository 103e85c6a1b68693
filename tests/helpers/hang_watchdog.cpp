// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 kvtier authors
// A test still running after KVTIER_TEST_HANG_S seconds (300 unless set; the cluster tests set it
// under ctest's limit for them) has every thread's stack printed by gdb, then the process aborts.
// Killed by ctest's timeout instead, a hang leaves only the test's name: not even its seed, which
// sits in a stdout buffer never flushed.
#include <gtest/gtest.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace {

using Clock = std::chrono::steady_clock;

std::chrono::seconds hang_limit() {
  const char* env = std::getenv("KVTIER_TEST_HANG_S");
  const long s = env != nullptr ? std::strtol(env, nullptr, 10) : 0;
  return std::chrono::seconds(s > 0 ? s : 300);
}

/// Prints every thread's stack of process `pid` to stderr through gdb, waiting at most `limit` for
/// it. Between fork and exec the child only makes system calls (another thread may hold the
/// allocator's lock).
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

/// The processes this one started that still run (a tool the test waits for may be what hangs).
std::vector<pid_t> children() {
  std::vector<pid_t> out;
  std::error_code ec;
  for (const auto& task : std::filesystem::directory_iterator("/proc/self/task", ec)) {
    std::ifstream list(task.path() / "children");
    for (pid_t pid; list >> pid;) out.push_back(pid);
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

class HangWatchdog final : public ::testing::EmptyTestEventListener {
 public:
  void OnTestProgramStart(const ::testing::UnitTest&) override {
    thread_ = std::thread([this] { watch(); });
  }
  void OnTestProgramEnd(const ::testing::UnitTest&) override {
    {
      std::lock_guard lock(mu_);
      stop_ = true;
    }
    cv_.notify_all();
    if (thread_.joinable()) thread_.join();
  }
  // No notify: the watcher wakes at deadlines only, not as a test starts, which may fork then
  // (a child copies whatever lock a running thread holds).
  void OnTestStart(const ::testing::TestInfo& test) override {
    std::lock_guard lock(mu_);
    name_ = std::string(test.test_suite_name()) + "." + test.name();
    deadline_ = Clock::now() + limit_;
    running_ = true;
  }
  void OnTestEnd(const ::testing::TestInfo&) override {
    std::lock_guard lock(mu_);
    running_ = false;
  }

 private:
  void watch() {
    std::unique_lock lock(mu_);
    for (;;) {
      if (stop_) return;
      const Clock::time_point now = Clock::now();
      if (!running_ || now < deadline_) {
        // A test that starts meanwhile has a later deadline than this wait's end.
        cv_.wait_until(lock, running_ ? deadline_ : now + limit_);
        continue;
      }
      std::fflush(stdout);
      std::fprintf(stderr, "\nhang watchdog: %s still runs after %lld s; every thread's stack:\n",
                   name_.c_str(), static_cast<long long>(limit_.count()));
      // Where Yama restricts ptrace to ancestors, this lets gdb attach to this process.
      prctl(PR_SET_PTRACER, PR_SET_PTRACER_ANY, 0, 0, 0);
      print_stacks(getpid(), std::chrono::seconds(10));
      // The servers a test started wait for requests by design; a tool or helper may be stuck.
      for (const pid_t child : children()) {
        const std::string command = command_line(child);
        std::fprintf(stderr, "\nhang watchdog: child process %d: %s\n", static_cast<int>(child),
                     command.c_str());
        std::fflush(stderr);
        if (command.rfind("redis-server", 0) != 0) print_stacks(child, std::chrono::seconds(5));
      }
      std::fflush(stderr);
      std::abort();
    }
  }

  const std::chrono::seconds limit_ = hang_limit();
  std::mutex mu_;
  std::condition_variable cv_;
  Clock::time_point deadline_;  // of the test running now, or of the last one
  bool running_ = false;
  std::string name_;
  bool stop_ = false;
  std::thread thread_;
};

// gtest_main's main() runs every test after static initialisation: the listener is in place.
[[maybe_unused]] const bool registered = [] {
  ::testing::UnitTest::GetInstance()->listeners().Append(new HangWatchdog);
  return true;
}();

}  // namespace
