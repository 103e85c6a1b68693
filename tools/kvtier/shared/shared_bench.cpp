// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 kvtier authors
#include "shared_bench.hpp"

#include <sys/utsname.h>

#include <algorithm>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <thread>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "api/try.hpp"
#include "common/posix.hpp"
#include "rank_channel.hpp"
#include "rank_worker.hpp"
#include "samplers.hpp"
#include "seed_table.hpp"
#include "workload.hpp"

namespace kvtier::shared {
namespace {

using Json = nlohmann::ordered_json;
using seed::RankChannel;
using Ranks = std::vector<std::unique_ptr<RankChannel>>;
namespace fs = std::filesystem;

constexpr const char* kConfigs[] = {"cluster", "ceiling", "local"};

class SharedRun {
 public:
  SharedRun(std::string self, cli::StoreFlags store, SharedFlags flags)
      : self_(std::move(self)), store_(std::move(store)), flags_(std::move(flags)) {}

  Result<int> run(const std::string& command_line) {
    KVTIER_EXPECTS(!store_.remote.empty(),
                   "--workload shared needs --remote (the cluster's seeds; "
                   "bench/remote/start_cluster.sh starts one)");
    KVTIER_EXPECTS(flags_.ranks >= 1 && flags_.ranks <= 8, "--ranks must be 1..8");
    KVTIER_ASSIGN_OR_RETURN(
        sessions_, seed::make_sessions(seed::WorkloadSpec{flags_.sessions, flags_.tokens_min,
                                                          flags_.tokens_max, flags_.seed}));
    if (flags_.out.empty()) {
      char stamp[32];
      const std::time_t now = std::time(nullptr);
      std::strftime(stamp, sizeof(stamp), "%Y%m%d-%H%M%S", std::localtime(&now));
      flags_.out = fmt::format("kvtier-shared-{}", stamp);
    }
    KVTIER_TRY(cli::make_store_dirs(store_.root));
    fs::create_directories(flags_.out);
    std::setvbuf(stdout, nullptr, _IOLBF, 0);
    std::printf("kvtier bench --workload shared (%s)\n", KVTIER_VERSION_STRING);
#ifndef NDEBUG
    std::printf("WARNING: debug build: figures are not representative\n");
#endif
    out_["command"] = command_line;
    out_["mode"] = "shared";
    out_["workload"] = {{"sessions", sessions_.size()},    {"tokens_min", flags_.tokens_min},
                        {"tokens_max", flags_.tokens_max}, {"seed", flags_.seed},
                        {"ranks", flags_.ranks},           {"rounds", flags_.rounds},
                        {"model", store_.model},           {"chunk_tokens", store_.chunk_tokens}};
    for (const auto& s : sessions_) out_["workload"]["session_tokens"].push_back(s.tokens);
    KVTIER_TRY(node_a());
    KVTIER_TRY(node_b());
    return finish();
  }

 private:
  std::string stage_root(const std::string& name) const {
    std::string root;
    std::stringstream in(store_.root);
    for (std::string dir; std::getline(in, dir, ',');)
      root += (root.empty() ? "" : ",") + (fs::path(dir) / name).string();
    return root;
  }

  void remove_stage(const std::string& root) const {
    std::stringstream in(root);
    for (std::string dir; std::getline(in, dir, ',');) {
      fs::remove_all(dir);
      fs::remove_all(dir + "-local");
    }
  }

  Result<Ranks> start_node(const std::string& root) {
    remove_stage(root);  // node B's store must start empty; node A's too, so that it saves
    uint64_t max_tokens = 0;
    for (const auto& s : sessions_) max_tokens = std::max(max_tokens, s.tokens);
    Ranks ranks;
    for (uint32_t r = 0; r < flags_.ranks; ++r) {
      seed::RankArgs rank{store_, max_tokens, flags_.device, static_cast<int>(r)};
      rank.store.root = root;
      rank.store.tp_rank = r;
      rank.store.tp_world = flags_.ranks;
      const std::vector<std::string> argv = seed::rank_command(self_, rank);
      KVTIER_ASSIGN_OR_RETURN(auto ch, RankChannel::spawn(argv));
      ranks.push_back(std::move(ch));
    }
    hello_.clear();
    for (auto& r : ranks) {
      KVTIER_ASSIGN_OR_RETURN(Json hello, r->receive());
      hello_.push_back(std::move(hello));
    }
    return ranks;
  }

  uint64_t kv_bytes(const seed::SessionSpec& s) const {
    uint64_t b = 0;
    for (const Json& h : hello_) b += h["kv_bytes_per_token"].get<uint64_t>() * s.tokens;
    return b;
  }

  static Json session_op(const char* op, const seed::SessionSpec& s, const char* engine = "") {
    Json c = {{"op", op}, {"seed", s.seed}, {"tokens", s.tokens}};
    if (*engine != '\0') c["engine"] = engine;
    return c;
  }

  // Node A: saves every session (local store, then written behind to the cluster) and waits for
  // write-behind to drain. A record dropped or failed on the way would be a miss on node B: the run
  // stops here instead.
  Status node_a() {
    const std::string root = stage_root("shared-nodeA");
    KVTIER_ASSIGN_OR_RETURN(Ranks a, start_node(root));
    std::printf("\n== node A: %zu sessions x %u ranks, %s; store %s; cluster %s\n",
                sessions_.size(), flags_.ranks, hello_.front().value("device", "").c_str(),
                root.c_str(), store_.remote.c_str());
    KVTIER_ASSIGN_OR_RETURN(auto opened,
                            seed::broadcast(a, Json{{"op", "open"}, {"remote", true}}));
    KVTIER_EXPECTS(
        opened[0].value("remote", "") == "ok",
        fmt::format("node A: the remote tier is not ok: {}", opened[0].value("remote", "")));
    cli::Progress progress("node A saves");
    double save_s = 0;
    uint64_t saved = 0;
    for (size_t i = 0; i < sessions_.size(); ++i) {
      KVTIER_ASSIGN_OR_RETURN(auto r, seed::broadcast(a, session_op("prefill_save", sessions_[i])));
      for (const Json& x : r) {
        save_s = std::max(save_s, x["save_seconds"].get<double>());
        saved += x["chunks_written"].get<uint64_t>();
      }
      progress.update(i + 1, sessions_.size());
    }
    progress.finish();
    KVTIER_ASSIGN_OR_RETURN(auto drained, seed::broadcast(a, Json{{"op", "remote_drain"}}));
    uint64_t writes = 0, drops = 0, errors = 0;
    double drain_s = 0;
    for (const Json& d : drained) {
      writes += d["remote_writes"].get<uint64_t>();
      drops += d["remote_write_drops"].get<uint64_t>();
      errors += d["remote_write_errors"].get<uint64_t>();
      drain_s = std::max(drain_s, d["seconds"].get<double>());
    }
    std::printf(
        "-- node A: %lu records saved, %lu written behind (%lu dropped, %lu failed); "
        "drained %.1f s after the last save\n",
        static_cast<unsigned long>(saved), static_cast<unsigned long>(writes),
        static_cast<unsigned long>(drops), static_cast<unsigned long>(errors), drain_s);
    out_["node_a"] = {
        {"records_saved", saved},      {"remote_writes", writes},
        {"remote_write_drops", drops}, {"remote_write_errors", errors},
        {"drain_seconds", drain_s},    {"device", hello_.front().value("device", "")}};
    for (auto& r : a) (void)r->send(Json{{"op", "quit"}});
    a.clear();
    if (!flags_.keep) remove_stage(root);
    KVTIER_EXPECTS(drops == 0 && errors == 0 && writes == saved,
                   fmt::format("node A: {} of {} records reached the cluster ({} dropped, {} "
                               "failed): node B would miss the rest",
                               writes, saved, drops, errors));
    return {};
  }

  Status node_b() {
    const std::string root = stage_root("shared-nodeB");
    KVTIER_ASSIGN_OR_RETURN(Ranks b, start_node(root));
    device_ = hello_.front().value("device", "");
    std::printf("\n== node B: %u ranks, %s; store %s (empty) and %s-local\n", flags_.ranks,
                device_.c_str(), root.c_str(), root.c_str());
    // Promotion off: every round's (a) reads the cluster, not what an earlier round promoted.
    KVTIER_ASSIGN_OR_RETURN(
        auto opened,
        seed::broadcast(b, Json{{"op", "open"}, {"remote", true}, {"promote", false}}));
    KVTIER_TRY(status_of(seed::broadcast(b, Json{{"op", "open_local"}})));
    out_["node_b"] = {{"device", device_},
                      {"io_engine", opened[0].value("io_engine", "")},
                      {"staging_bytes", opened[0].value("staging_bytes", uint64_t{0})},
                      {"connections_per_node", opened[0].value("connections_per_node", 0u)}};
    {
      cli::Progress progress("node B local saves");
      for (size_t i = 0; i < sessions_.size(); ++i) {
        KVTIER_TRY(
            status_of(seed::broadcast(b, session_op("prefill_save", sessions_[i], "local"))));
        progress.update(i + 1, sessions_.size());
      }
      progress.finish();
    }
    KVTIER_TRY(status_of(seed::broadcast(b, session_op("warm", sessions_[0]))));
    cli::Progress progress("node B rounds");
    const uint64_t total = flags_.rounds * sessions_.size();
    for (uint64_t round = 0; round < flags_.rounds; ++round) {
      for (size_t i = 0; i < sessions_.size(); ++i) {
        // The three in a rotating order: none always runs first, after the same one, or warm.
        const size_t first = (round + i) % 3;
        for (size_t k = 0; k < 3; ++k) {
          KVTIER_TRY(measure(b, kConfigs[(first + k) % 3], round, i));
        }
        progress.update(round * sessions_.size() + i + 1, total);
      }
    }
    progress.finish();
    for (auto& r : b) (void)r->send(Json{{"op", "quit"}});
    b.clear();
    if (!flags_.keep) remove_stage(root);
    return {};
  }

  template <typename T>
  static Status status_of(const Result<T>& r) {
    return r ? Status{} : r.error();
  }

  Status measure(Ranks& b, const std::string& config, uint64_t round, size_t i) {
    const seed::SessionSpec& s = sessions_[i];
    Json row = {{"config", config},
                {"round", round},
                {"request", i},
                {"tokens", s.tokens},
                {"kv_bytes", kv_bytes(s)}};
    const char* engine = config == "local" ? "local" : "";
    double seconds = 0, cpu = 0;
    if (config == "ceiling") {
      KVTIER_ASSIGN_OR_RETURN(auto r, seed::broadcast(b, session_op("remote_ceiling", s)));
      uint64_t bytes = 0;
      for (const Json& x : r) {
        seconds = std::max(seconds, x["seconds"].get<double>());
        cpu += x["cpu_seconds"].get<double>();
        bytes += x["bytes"].get<uint64_t>();
      }
      row["value_bytes"] = bytes;
      row["depth"] = r[0]["depth"];
      row["nodes"] = r[0]["nodes"];
    } else {
      KVTIER_TRY(status_of(seed::broadcast(b, Json{{"op", "poison"}})));
      if (config == "local") {
        KVTIER_TRY(dropper_.drop(b));
        KVTIER_TRY(status_of(seed::broadcast(b, Json{{"op", "drop"}, {"engine", "local"}})));
      }
      KVTIER_ASSIGN_OR_RETURN(auto r, seed::broadcast(b, session_op("restore", s, engine)));
      uint64_t restored = 0, hits = 0, misses = 0;
      std::string problem, remote;
      for (const Json& x : r) {
        seconds = std::max(seconds, x["seconds"].get<double>());
        cpu += x["cpu_seconds"].get<double>();
        restored += x["kv_bytes"].get<uint64_t>();
        hits += x["remote_hits"].get<uint64_t>();
        misses += x["remote_misses"].get<uint64_t>();
        if (problem.empty()) problem = x.value("problem", "");
        remote = x.value("remote", "");
      }
      KVTIER_ASSIGN_OR_RETURN(auto checks, seed::broadcast(b, session_op("check", s)));
      bool exact = restored == row["kv_bytes"].get<uint64_t>();
      for (const Json& c : checks) exact = exact && c["exact"].get<bool>();
      row["kv_bytes_restored"] = restored;
      row["bytes_compared"] = row["kv_bytes"];
      row["exact"] = exact;
      row["remote_hits"] = hits;
      row["remote_misses"] = misses;
      if (!problem.empty()) row["problem"] = problem;
      if (config == "cluster") row["remote"] = remote;
      if (!exact) {
        std::printf(
            "\nERROR: %s restore of session %zu (round %lu) is not byte-exact: %lu of %lu "
            "bytes restored, remote tier '%s'%s\n",
            config.c_str(), i, static_cast<unsigned long>(round),
            static_cast<unsigned long>(restored),
            static_cast<unsigned long>(row["kv_bytes"].get<uint64_t>()), remote.c_str(),
            problem.empty() ? "" : (", " + problem).c_str());
      }
    }
    row["seconds"] = seconds;
    row["gbps"] = static_cast<double>(kv_bytes(s)) / seconds / 1e9;
    row["cpu_core_seconds"] = cpu;
    row["cpu_core_s_per_gb"] = cpu / (static_cast<double>(kv_bytes(s)) / 1e9);
    rows_.push_back(std::move(row));
    return {};
  }

  Json summarize() const {
    Json summary = Json::array();
    for (const char* config : kConfigs) {
      std::vector<double> gbps, cpu;
      for (const Json& r : rows_) {
        if (r["config"] != config) continue;
        gbps.push_back(r["gbps"].get<double>());
        cpu.push_back(r["cpu_core_s_per_gb"].get<double>());
      }
      Json s = {{"config", config},
                {"restores", gbps.size()},
                {"gbps", seed::quantile(gbps, 0.5)},
                {"gbps_min", gbps.empty() ? 0 : *std::min_element(gbps.begin(), gbps.end())},
                {"gbps_max", gbps.empty() ? 0 : *std::max_element(gbps.begin(), gbps.end())},
                {"cpu_core_s_per_gb", seed::quantile(cpu, 0.5)}};
      // Each restore against the ceiling of the same session in the same round.
      std::vector<double> ratio;
      for (const Json& r : rows_) {
        if (r["config"] != config) continue;
        for (const Json& c : rows_) {
          if (c["config"] == "ceiling" && c["round"] == r["round"] && c["request"] == r["request"])
            ratio.push_back(c["seconds"].get<double>() / r["seconds"].get<double>());
        }
      }
      s["ratio_to_ceiling"] = seed::quantile(ratio, 0.5);
      s["ratio_to_ceiling_min"] = ratio.empty() ? 0 : *std::min_element(ratio.begin(), ratio.end());
      summary.push_back(std::move(s));
    }
    return summary;
  }

  std::string render(const Json& summary, const Json& check) const {
    std::string t = fmt::format(
        "Sharing KV across nodes: node B restores {} session(s) of {}-{} tokens ({}, TP {}), {} "
        "round(s); KV into {}\n\n",
        sessions_.size(), flags_.tokens_min, flags_.tokens_max, store_.model, flags_.ranks,
        flags_.rounds, device_);
    t += "| node B | restores | GB/s (median) | min - max | x raw GET ceiling (median, min) | "
         "kvtier CPU core-s/GB |\n|---|---|---|---|---|---|\n";
    for (const Json& s : summary) {
      const std::string name = s["config"] == "cluster"   ? "(a) from the cluster"
                               : s["config"] == "ceiling" ? "(b) raw GET ceiling (hiredis)"
                                                          : "(c) from its own store";
      t += fmt::format("| {} | {} | {:.2f} | {:.2f} - {:.2f} | {:.2f}, {:.2f} | {:.3f} |\n", name,
                       s["restores"].get<uint64_t>(), s["gbps"].get<double>(),
                       s["gbps_min"].get<double>(), s["gbps_max"].get<double>(),
                       s["ratio_to_ceiling"].get<double>(), s["ratio_to_ceiling_min"].get<double>(),
                       s["cpu_core_s_per_gb"].get<double>());
    }
    t += fmt::format(
        "\nGB/s: session KV bytes over the slowest rank's time. Ceiling: the same values GET over "
        "{} connection(s) per master, no verification (its CPU column is the GET's own). "
        "Byte-exact: {} restores, {} bytes compared, {} wrong.\n",
        out_["node_b"]["connections_per_node"].get<uint32_t>(), check["restores"].get<uint64_t>(),
        check["bytes_compared"].get<uint64_t>(), check["wrong_restores"].get<uint64_t>());
    return t;
  }

  Result<int> finish() {
    uint64_t restores = 0, compared = 0, wrong = 0;
    for (const Json& r : rows_) {
      if (!r.contains("exact")) continue;
      ++restores;
      compared += r["bytes_compared"].get<uint64_t>();
      if (!r["exact"].get<bool>()) ++wrong;
    }
    const Json check = {
        {"restores", restores}, {"bytes_compared", compared}, {"wrong_restores", wrong}};
    const Json summary = summarize();
    utsname u{};
    ::uname(&u);
    out_["machine"] = {{"kernel", fmt::format("{} {}", u.sysname, u.release)},
                       {"cores", std::thread::hardware_concurrency()},
                       {"device", device_}};
    out_["summary"] = summary;
    out_["check"] = check;
    out_["requests"] = rows_;
    std::ofstream(fs::path(flags_.out) / "shared.json") << out_.dump(2) << "\n";
    const std::string table = render(summary, check);
    std::ofstream(fs::path(flags_.out) / "table.md") << table;
    std::printf("\n%s\nresults: %s (shared.json, table.md)\n", table.c_str(), flags_.out.c_str());
    if (flags_.report) (void)seed::make_report(flags_.out);
    if (wrong > 0) {
      std::printf("ERROR: %lu restore(s) were not byte-exact\n", static_cast<unsigned long>(wrong));
      return 1;
    }
    return 0;
  }

  std::string self_;
  cli::StoreFlags store_;
  SharedFlags flags_;
  std::vector<seed::SessionSpec> sessions_;
  std::vector<Json> hello_;
  std::vector<Json> rows_;
  std::string device_;
  seed::CacheDropper dropper_;
  Json out_;
};

}  // namespace

int run_shared_bench(const std::string& self, cli::StoreFlags store, const SharedFlags& flags,
                     const std::string& command_line) {
  SharedRun run(self, std::move(store), flags);
  auto rc = run.run(command_line);
  if (!rc) return cli::report(rc.error(), "bench --workload shared");
  return *rc;
}

}  // namespace kvtier::shared
