// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 kvtier authors
#include "redis_cluster.hpp"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <random>
#include <sstream>
#include <thread>

namespace kvtier::testing {
namespace {

using namespace std::chrono_literals;

Status error(std::string message) { return Status(ErrorCode::kInternal, std::move(message)); }

/// fork + exec with the child's output in `out_fd`; the child dies with this process. Between
/// fork and exec the child only makes system calls: an allocation there can wait for ever on a
/// lock another thread of the parent held at the fork (TSan's allocator is one such).
pid_t spawn(const std::vector<std::string>& argv, int out_fd) {
  std::vector<char*> args;
  for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  const pid_t parent = getpid();
  const pid_t pid = fork();
  if (pid != 0) return pid;
  prctl(PR_SET_PDEATHSIG, SIGKILL);
  if (getppid() != parent) _exit(127);  // the parent died before prctl took effect
  dup2(out_fd, STDOUT_FILENO);
  dup2(out_fd, STDERR_FILENO);
  execvp(args[0], args.data());
  _exit(127);
}

bool port_free(uint16_t port) {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(port);
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  const bool ok = bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0;
  close(fd);
  return ok;
}

bool port_listening(uint16_t port) {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(port);
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  const bool ok = connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0;
  close(fd);
  return ok;
}

/// A port whose cluster bus port (+10000) is free too.
uint16_t pick_port(std::mt19937& rng, const std::vector<uint16_t>& taken) {
  std::uniform_int_distribution<int> dist(20000, 45000);
  for (;;) {
    const auto port = static_cast<uint16_t>(dist(rng));
    if (std::find(taken.begin(), taken.end(), port) != taken.end()) continue;
    if (port_free(port) && port_free(static_cast<uint16_t>(port + 10000))) return port;
  }
}

std::vector<std::string> split_words(const std::string& line) {
  std::istringstream in(line);
  std::vector<std::string> words;
  for (std::string w; in >> w;) words.push_back(w);
  return words;
}

RedisCluster::NodeInfo parse_node_line(const std::string& line) {
  // <id> <ip:port@cport> <flags> <master> <ping> <pong> <epoch> <link> <slot>...
  const auto words = split_words(line);
  RedisCluster::NodeInfo node;
  if (words.size() < 8) return node;
  node.id = words[0];
  const std::string& address = words[1];
  node.port = static_cast<uint16_t>(std::stoi(address.substr(address.rfind(':') + 1)));
  node.master = words[2].find("master") != std::string::npos;
  node.failed =
      words[2].find("fail") != std::string::npos && words[2].find("fail?") == std::string::npos;
  for (size_t i = 8; i < words.size(); ++i) {
    if (words[i].front() == '[') continue;  // a slot being migrated or imported
    const size_t dash = words[i].find('-');
    const uint32_t first = std::stoul(words[i].substr(0, dash));
    const uint32_t last = dash == std::string::npos ? first : std::stoul(words[i].substr(dash + 1));
    node.slots.emplace_back(first, last);
  }
  return node;
}

}  // namespace

ToolRun run_tool(const std::vector<std::string>& argv, std::chrono::milliseconds limit) {
  int fds[2];
  if (pipe2(fds, O_CLOEXEC) != 0) return {};
  const pid_t pid = spawn(argv, fds[1]);
  close(fds[1]);
  ToolRun run;
  const auto deadline = std::chrono::steady_clock::now() + limit;
  bool timed_out = false;
  char buffer[4096];
  for (;;) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - std::chrono::steady_clock::now());
    pollfd readable{fds[0], POLLIN, 0};
    const int ready = left.count() > 0 ? poll(&readable, 1, static_cast<int>(left.count())) : 0;
    if (ready < 0 && errno == EINTR) continue;
    if (ready == 0) {
      timed_out = true;
      break;
    }
    const ssize_t n = read(fds[0], buffer, sizeof(buffer));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    run.output.append(buffer, static_cast<size_t>(n));
  }
  close(fds[0]);
  if (timed_out) ::kill(pid, SIGKILL);
  int status = 0;
  waitpid(pid, &status, 0);
  run.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  if (timed_out) {
    run.exit_code = 124;
    run.output += "\n(" + argv.front() + " killed: still running after " +
                  std::to_string(limit.count()) + " ms)";
  }
  return run;
}

RedisCluster::RedisCluster(Config config) : config_(std::move(config)) {}

RedisCluster::~RedisCluster() {
  for (pid_t& pid : pids_) {
    if (pid <= 0) continue;
    ::kill(pid, SIGKILL);
    waitpid(pid, nullptr, 0);
    pid = -1;
  }
  std::error_code ignored;
  std::filesystem::remove_all(dir_, ignored);
}

Result<std::unique_ptr<RedisCluster>> RedisCluster::start(Config config) {
  if (run_tool({"redis-server", "--version"}).exit_code != 0) {
    return fail(ErrorCode::kNotSupported,
                "redis-server is not installed (tools/setup.sh installs it)");
  }
  // A cluster whose nodes did not come to agree is started again on new ports (its servers are
  // killed with it): the suite runs on loaded machines, and one such start is no test's failure.
  for (int attempt = 1;; ++attempt) {
    std::unique_ptr<RedisCluster> cluster(new RedisCluster(config));
    if (Status s = cluster->launch(); !s.ok()) return fail(s);
    if (!cluster->config_.cluster || !cluster->config_.form_cluster) return cluster;
    Status formed = cluster->create_cluster();
    if (formed.ok()) return cluster;
    if (attempt == 2) return fail(formed);
    std::fprintf(stderr, "redis cluster: start %d of 2 failed (%s); starting again\n", attempt,
                 formed.to_string().c_str());
  }
}

Status RedisCluster::launch() {
  dir_ = std::filesystem::temp_directory_path() / ("kvtier-redis-" + std::to_string(getpid()) +
                                                   "-" + std::to_string(std::random_device{}()));
  std::filesystem::create_directories(dir_);
  std::mt19937 rng(std::random_device{}());
  const int count = config_.cluster ? config_.masters * (1 + config_.replicas_per_master) : 1;
  for (int i = 0; i < count; ++i) {
    // A port found free can be taken before our server binds it (tests run in parallel, each
    // starting servers): then ours exits and another answers there. Such a start is retried on a
    // new port until the server on it is the one we started.
    Status last;
    for (int attempt = 0; attempt < 20; ++attempt) {
      last = start_server(pick_port(rng, ports_));
      if (last.ok()) break;
    }
    if (!last.ok()) return last;
  }
  return {};
}

Status RedisCluster::start_server(uint16_t port) {
  const std::string p = std::to_string(port);
  std::vector<std::string> argv = {
      "redis-server", "--port",      p,        "--bind",    "127.0.0.1",
      "--dir",        dir_.string(), "--save", "",          "--appendonly",
      "no",           "--daemonize", "no",     "--logfile", (dir_ / (p + ".log")).string(),
      "--dbfilename", p + ".rdb"};
  if (config_.cluster) {
    for (const char* a : {"--cluster-enabled", "yes", "--cluster-node-timeout", "1000",
                          "--cluster-replica-validity-factor", "0"})
      argv.emplace_back(a);
    argv.insert(argv.end(), {"--cluster-config-file", p + ".nodes.conf"});
  }
  if (!config_.password.empty()) {
    argv.insert(argv.end(), {"--requirepass", config_.password, "--masterauth", config_.password});
  }
  const int devnull = open("/dev/null", O_WRONLY | O_CLOEXEC);
  const pid_t pid = spawn(argv, devnull);
  close(devnull);
  const auto deadline = std::chrono::steady_clock::now() + 10s;
  for (;;) {
    int status = 0;
    if (waitpid(pid, &status, WNOHANG) == pid)
      return error("redis-server exited at start on port " + p);
    if (port_listening(port)) {
      const ToolRun info = cli(port, {"INFO", "server"});
      if (info.output.find("process_id:" + std::to_string(pid) + "\r") != std::string::npos ||
          info.output.find("process_id:" + std::to_string(pid) + "\n") != std::string::npos) {
        pids_.push_back(pid);
        ports_.push_back(port);
        return {};
      }
    }
    if (std::chrono::steady_clock::now() > deadline) {
      ::kill(pid, SIGKILL);
      waitpid(pid, nullptr, 0);
      return error("redis-server did not start on port " + p);
    }
    std::this_thread::sleep_for(10ms);
  }
}

Status RedisCluster::create_cluster() {
  std::vector<std::string> argv = {"redis-cli", "--cluster", "create"};
  for (uint16_t port : ports_) argv.push_back("127.0.0.1:" + std::to_string(port));
  argv.insert(argv.end(),
              {"--cluster-replicas", std::to_string(config_.replicas_per_master), "--cluster-yes"});
  if (!config_.password.empty())
    argv.insert(argv.end(), {"-a", config_.password, "--no-auth-warning"});
  // A second or two when the nodes meet; the test's time limit is 120 s.
  const ToolRun run = run_tool(argv, 20s);
  if (run.exit_code != 0) return error("redis-cli --cluster create failed: " + run.output);
  if (Status st = wait_state_ok(20s); !st.ok()) return st;
  // cluster_state:ok comes before every node has heard that the replicas are replicas: wait until
  // each node sees the configured masters and replicas, so tests start from the same topology.
  const auto deadline = std::chrono::steady_clock::now() + 20s;
  for (;;) {
    bool converged = true;
    for (uint16_t port : ports_) {
      size_t masters = 0, replicas = 0;
      std::istringstream in(cli(port, {"cluster", "nodes"}).output);
      for (std::string line; std::getline(in, line);) {
        if (line.empty()) continue;
        (parse_node_line(line).master ? masters : replicas) += 1;
      }
      converged = converged && masters == static_cast<size_t>(config_.masters) &&
                  replicas == static_cast<size_t>(config_.masters * config_.replicas_per_master);
    }
    if (converged) return {};
    if (std::chrono::steady_clock::now() > deadline)
      return error("the cluster's nodes did not agree on its topology");
    std::this_thread::sleep_for(50ms);
  }
}

ToolRun RedisCluster::cli(uint16_t port, const std::vector<std::string>& args) const {
  std::vector<std::string> argv = {"redis-cli", "-p", std::to_string(port)};
  if (!config_.password.empty())
    argv.insert(argv.end(), {"-a", config_.password, "--no-auth-warning"});
  argv.insert(argv.end(), args.begin(), args.end());
  return run_tool(argv, 20s);  // milliseconds when the server is there
}

uint16_t RedisCluster::live_port() const {
  for (size_t i = 0; i < ports_.size(); ++i) {
    if (pids_[i] > 0) return ports_[i];
  }
  return 0;
}

Status RedisCluster::wait_state_ok(std::chrono::milliseconds limit) const {
  const auto deadline = std::chrono::steady_clock::now() + limit;
  for (;;) {
    bool all_ok = true;
    for (size_t i = 0; i < ports_.size() && all_ok; ++i) {
      if (pids_[i] <= 0) continue;
      all_ok =
          cli(ports_[i], {"cluster", "info"}).output.find("cluster_state:ok") != std::string::npos;
    }
    if (all_ok) return {};
    if (std::chrono::steady_clock::now() > deadline)
      return error("cluster_state did not become ok");
    std::this_thread::sleep_for(50ms);
  }
}

Result<std::vector<RedisCluster::NodeInfo>> RedisCluster::nodes() const {
  const ToolRun run = cli(live_port(), {"cluster", "nodes"});
  if (run.exit_code != 0) return fail(error("cluster nodes: " + run.output));
  std::vector<NodeInfo> nodes;
  std::istringstream in(run.output);
  for (std::string line; std::getline(in, line);) {
    if (!line.empty()) nodes.push_back(parse_node_line(line));
  }
  return nodes;
}

Result<RedisCluster::NodeInfo> RedisCluster::master_of(uint32_t slot) const {
  auto all = nodes();
  if (!all) return fail(all.error());
  for (const NodeInfo& node : *all) {
    if (!node.master || node.failed) continue;
    for (auto [first, last] : node.slots) {
      if (slot >= first && slot <= last) return node;
    }
  }
  return fail(error("no live master serves slot " + std::to_string(slot)));
}

Status RedisCluster::wait_replicated() const {
  const auto deadline = std::chrono::steady_clock::now() + 10s;
  for (size_t i = 0; i < ports_.size(); ++i) {
    if (pids_[i] <= 0) continue;
    for (;;) {
      const ToolRun asked = cli(ports_[i], {"info", "replication"});
      if (asked.exit_code != 0) {
        // Not an answer that the node is a replica: asked again until the deadline.
        if (std::chrono::steady_clock::now() > deadline)
          return error("info replication on port " + std::to_string(ports_[i]) + ": " +
                       asked.output);
        std::this_thread::sleep_for(20ms);
        continue;
      }
      const std::string& info = asked.output;
      if (info.find("role:master") == std::string::npos) break;
      // Every "slaveN:...,offset=X," line must have the master's offset.
      const size_t at = info.find("master_repl_offset:");
      const std::string offset = info.substr(at + 19, info.find('\r', at) - at - 19);
      bool caught_up =
          info.find("connected_slaves:0") == std::string::npos || config_.replicas_per_master == 0;
      for (size_t s = info.find("slave0:"); s != std::string::npos;
           s = info.find("\nslave", s + 1)) {
        caught_up = info.find("offset=" + offset + ",", s) < info.find('\n', s + 1);
        if (!caught_up) break;
      }
      if (caught_up) break;
      if (std::chrono::steady_clock::now() > deadline) return error("replicas did not catch up");
      std::this_thread::sleep_for(20ms);
    }
  }
  return {};
}

Status RedisCluster::kill(uint16_t port) {
  for (size_t i = 0; i < ports_.size(); ++i) {
    if (ports_[i] != port || pids_[i] <= 0) continue;
    ::kill(pids_[i], SIGKILL);
    waitpid(pids_[i], nullptr, 0);
    pids_[i] = -1;
    return {};
  }
  return error("no live server on port " + std::to_string(port));
}

Status RedisCluster::wait_failover(uint16_t dead_port) {
  const auto deadline = std::chrono::steady_clock::now() + 30s;
  for (;;) {
    auto all = nodes();
    bool taken_over = false;
    if (all) {
      for (const NodeInfo& node : *all) {
        if (node.port == dead_port && node.failed && node.slots.empty()) taken_over = true;
      }
    }
    if (taken_over)
      return wait_state_ok(std::chrono::duration_cast<std::chrono::milliseconds>(
          deadline - std::chrono::steady_clock::now()));
    if (std::chrono::steady_clock::now() > deadline) return error("no replica took over");
    std::this_thread::sleep_for(50ms);
  }
}

ToolRun RedisCluster::reshard(const std::string& from_id, const std::string& to_id,
                              int slots) const {
  std::vector<std::string> argv = {"redis-cli",
                                   "--cluster",
                                   "reshard",
                                   "127.0.0.1:" + std::to_string(live_port()),
                                   "--cluster-from",
                                   from_id,
                                   "--cluster-to",
                                   to_id,
                                   "--cluster-slots",
                                   std::to_string(slots),
                                   "--cluster-yes",
                                   "--cluster-pipeline",
                                   "4"};
  if (!config_.password.empty())
    argv.insert(argv.end(), {"-a", config_.password, "--no-auth-warning"});
  return run_tool(argv);
}

std::string RedisCluster::seeds() const {
  std::string uri = "redis://";
  for (size_t i = 0; i < ports_.size(); ++i)
    uri += (i ? ",127.0.0.1:" : "127.0.0.1:") + std::to_string(ports_[i]);
  return uri;
}

}  // namespace kvtier::testing
