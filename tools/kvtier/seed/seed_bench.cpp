// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 kvtier authors
#include "seed_bench.hpp"

#include <sys/utsname.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <sstream>
#include <thread>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "api/try.hpp"
#include "common/head_groups.hpp"
#include "common/posix.hpp"
#include "host_load.hpp"
#include "kv_source.hpp"
#include "metrics/counters.hpp"
#include "rank_channel.hpp"
#include "rank_worker.hpp"
#include "samplers.hpp"
#include "seed_fio.hpp"
#include "seed_table.hpp"
#include "workload.hpp"

namespace kvtier::seed {
namespace {

using Json = nlohmann::ordered_json;
using cli::FioRead;
namespace fs = std::filesystem;

std::vector<std::string> split_list(const std::string& s) {
  std::vector<std::string> out;
  std::stringstream in(s);
  for (std::string item; std::getline(in, item, ',');) {
    if (!item.empty()) out.push_back(item);
  }
  return out;
}

/// Adds a rank's reply's staging slot time (its "slot_ns", by state) to `slots`.
void add_slot_times(const Json& reply, std::map<std::string, uint64_t>& slots) {
  if (!reply.contains("slot_ns")) return;
  for (const auto& [part, ns] : reply["slot_ns"].items()) slots[part] += ns.get<uint64_t>();
}

/// A row's slot_<state>_ns columns (seed_table's SLOTS lines).
void put_slot_times(Json& row, const std::map<std::string, uint64_t>& slots) {
  for (const auto& [part, ns] : slots) row[fmt::format("slot_{}_ns", part)] = ns;
}

template <typename T>
Status status_of(const Result<T>& r) {
  return r ? Status{} : r.error();
}

class SeedRun {
 public:
  SeedRun(std::string self, cli::StoreFlags store, SeedFlags flags)
      : self_(std::move(self)), store_(std::move(store)), flags_(std::move(flags)) {}

  Result<int> run(const std::string& command_line) {
    KVTIER_ASSIGN_OR_RETURN(
        sessions_, make_sessions(WorkloadSpec{flags_.sessions, flags_.tokens_min, flags_.tokens_max,
                                              flags_.seed}));
    KVTIER_EXPECTS(flags_.ranks >= 1 && flags_.ranks <= 8, "--ranks must be 1..8");
    KVTIER_TRY(check_restore_ranks());
    KVTIER_EXPECTS(restore_worlds_.empty() || flags_.concurrency.empty(),
                   "--restore-ranks applies to the sequential repeat phase, not --concurrency");
    for (const auto& c : split_list(flags_.concurrency)) {
      const unsigned long n = std::strtoul(c.c_str(), nullptr, 10);
      KVTIER_EXPECTS(n >= 1 && n <= 64, fmt::format("--concurrency: '{}' is not 1..64", c));
      concurrency_levels_.push_back(n);
    }
    KVTIER_EXPECTS(flags_.concurrency.empty() || !concurrency_levels_.empty(),
                   fmt::format("--concurrency: '{}' names no level", flags_.concurrency));
    KVTIER_ASSIGN_OR_RETURN(const auto kv_file,
                            check_kv_flag(flags_.kv, store_.model, flags_.ranks));
    const std::string kv_text = describe_kv(flags_.kv, kv_file ? &*kv_file : nullptr);
    for (const auto& p : split_list(flags_.paths)) KVTIER_TRY(check_path(p));
    for (const auto& p : split_list(flags_.sweep_paths)) KVTIER_TRY(check_path(p));
    std::vector<uint32_t> chunks = {store_.chunk_tokens};
    for (const auto& c : split_list(flags_.chunk_sweep)) {
      const unsigned long v = std::strtoul(c.c_str(), nullptr, 10);
      KVTIER_EXPECTS(v > 0 && v <= 1u << 20, fmt::format("--chunk-sweep: bad chunk size '{}'", c));
      if (std::find(chunks.begin(), chunks.end(), v) == chunks.end())
        chunks.push_back(static_cast<uint32_t>(v));
    }
    if (flags_.out.empty()) {
      char stamp[32];
      const std::time_t now = std::time(nullptr);
      std::strftime(stamp, sizeof(stamp), "%Y%m%d-%H%M%S", std::localtime(&now));
      flags_.out = fmt::format("kvtier-seed-{}", stamp);
    }
    KVTIER_TRY(cli::make_store_dirs(store_.root));
    fs::create_directories(flags_.out);
    fio_ = std::make_unique<SeedFio>(flags_.fio, flags_.fio_depth, flags_.fio_requests,
                                     (fs::path(flags_.out) / "fio").string());
    out_["command"] = command_line;
    out_["workload"] = {{"sessions", sessions_.size()},
                        {"tokens_min", flags_.tokens_min},
                        {"tokens_max", flags_.tokens_max},
                        {"seed", flags_.seed},
                        {"ranks", flags_.ranks},
                        {"model", store_.model},
                        {"chunk_tokens", store_.chunk_tokens},
                        {"kv", kv_text},
                        {"compress", store_.compress}};
    if (kv_file) {
      const KvFileDims& d = kv_file->dims;
      out_["workload"]["kv_file"] = {{"path", kv_file->path},
                                     {"shape", {2, d.layers, d.tokens, d.heads, d.head_dim}},
                                     {"model", kv_file->model}};
    }
    for (const SessionSpec& s : sessions_) out_["workload"]["session_tokens"].push_back(s.tokens);
    std::setvbuf(stdout, nullptr, _IOLBF, 0);  // progress and results interleave in logs in order
    std::printf("kvtier bench --workload seed (%s)\n", KVTIER_VERSION_STRING);
#ifndef NDEBUG
    std::printf("WARNING: debug build: figures are not representative\n");
#endif
    if (!flags_.concurrency.empty()) {
      out_["mode"] = "concurrency";
      KVTIER_TRY(run_concurrency());
    } else {
      for (uint32_t chunk : chunks) {
        const bool main = chunk == chunks.front();
        KVTIER_TRY(run_chunk(
            chunk, main ? split_list(flags_.paths) : split_list(flags_.sweep_paths), main));
      }
    }
    out_["headline"] = device_headline(machine_);
    out_["machine"] = machine_;
    out_["cufile"] = gds_notes_;
    out_["fallbacks"] = fallbacks_;
    out_["link_ceiling"] = ceiling_names_;
    out_["fio"] = fio_->json();
    out_["requests"] = rows_;
    const bool concurrent = !flags_.concurrency.empty();
    Json summary = concurrent ? summarize_concurrency(rows_, load_alone_gbps_) : summarize(rows_);
    out_["summary"] = summary;
    if (concurrent)
      out_["host_load"] = {{"threads", flags_.host_load}, {"alone_gbps", load_alone_gbps_}};
    const std::string json_path = (fs::path(flags_.out) / "seed.json").string();
    std::ofstream(json_path) << out_.dump(2) << "\n";
    write_csv(rows_, (fs::path(flags_.out) / "seed.csv").string());
    const std::string table =
        (concurrent ? render_concurrency_table(summary, machine_, gds_notes_)
                    : render_table(summary, machine_, gds_notes_, fio_->json())) +
        fmt::format("KV: {}\n", kv_text);
    std::ofstream(fs::path(flags_.out) / "table.md") << table;
    std::printf("\n%s\n", table.c_str());
    std::printf("results: %s (seed.json, seed.csv, table.md)\n", flags_.out.c_str());
    if (flags_.report) (void)make_report(flags_.out);
    bool exact = true;
    for (const Json& r : rows_) exact = exact && r.value("exact", true);
    if (!exact) std::printf("ERROR: some restores were not byte-exact (see seed.csv)\n");
    return exact ? 0 : 1;
  }

 private:
  // --restore-ranks: TP sizes the model and the TP-free store serve, each once, known before
  // anything is saved.
  Status check_restore_ranks() {
    const std::string& list = flags_.restore_ranks;
    if (list.empty()) return {};
    KVTIER_EXPECTS(
        list.find(",,") == std::string::npos && list.front() != ',' && list.back() != ',',
        fmt::format("--restore-ranks '{}': an empty item", list));
    std::set<uint32_t> seen;
    for (const auto& w : split_list(list)) {
      const unsigned long v = std::strtoul(w.c_str(), nullptr, 10);
      KVTIER_EXPECTS(v >= 1 && v <= 8 && w.find_first_not_of("0123456789") == std::string::npos,
                     fmt::format("--restore-ranks: '{}' is not a TP size 1..8", w));
      const auto world = static_cast<uint32_t>(v);
      KVTIER_EXPECTS(seen.insert(world).second,
                     fmt::format("--restore-ranks: {} is listed twice", world));
      // The saving size itself is restored again by ranks of a stage of their own, as every other
      // size is: the same-TP restore a TP change is held against, measured the same way.
      if (world == flags_.ranks) {
        restore_worlds_.push_back(world);
        continue;
      }
      KVTIER_EXPECTS(store_.store_format == 2,
                     "--restore-ranks needs --store-format 2: a store per rank (format 1) is read "
                     "only by ranks of the TP size that saved it");
      auto g = geometry_for(store_.model, 0, world, store_.chunk_tokens);
      if (!g) return g.error().with_context(fmt::format("--restore-ranks {}", world));
      const auto heads = rank_heads(HeadSplit{g->total_kv_heads(), store_.max_tp}, 0, world);
      if (!heads) return heads.error().with_context(fmt::format("--restore-ranks {}", world));
      restore_worlds_.push_back(world);
    }
    return {};
  }

  static Status check_path(const std::string& p) {
    if (p == "posix" || p == "gds" || p == "dram" || p == "buffered") return {};
    return {ErrorCode::kInvalidArgument,
            fmt::format("path '{}': expected posix, gds, dram or buffered", p)};
  }

  uint64_t max_tokens() const {
    uint64_t m = 0;
    for (const auto& s : sessions_) m = std::max(m, s.tokens);
    return m;
  }

  Result<std::vector<std::unique_ptr<RankChannel>>> start_ranks(const std::string& root,
                                                                uint32_t chunk, uint32_t world) {
    std::vector<std::unique_ptr<RankChannel>> ranks;
    for (uint32_t r = 0; r < world; ++r) {
      RankArgs rank{store_, max_tokens(), flags_.device, static_cast<int>(r), flags_.kv};
      rank.store.root = root;
      rank.store.tp_rank = r;
      rank.store.tp_world = world;
      rank.store.chunk_tokens = chunk;
      rank.store.remote.clear();  // the seed workload has no remote tier
      const std::vector<std::string> argv = rank_command(self_, rank);
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

  uint64_t session_kv_bytes(const SessionSpec& s) const {
    uint64_t b = 0;
    for (const Json& h : hello_) b += h["kv_bytes_per_token"].get<uint64_t>() * s.tokens;
    return b;
  }

  Result<uint64_t> dram_bytes_per_rank() const {
    uint64_t working_set = 0;
    for (const auto& s : sessions_) working_set += session_kv_bytes(s) / hello_.size();
    // Slabs are whole chunks: one partial chunk per session rounds up.
    working_set += working_set / 8 + (uint64_t{64} << 20);
    if (flags_.dram_bytes != "auto") return parse_size(flags_.dram_bytes);
    uint64_t available = 0;
    if (auto m = read_file("/proc/meminfo")) {
      const auto at = m->find("MemAvailable:");
      if (at != std::string::npos)
        available = std::strtoull(m->c_str() + at + 13, nullptr, 10) * 1024;
    }
    const uint64_t cap = available * 6 / 10 / hello_.size();
    return std::min(working_set, cap);
  }

  /// The rank processes of one store, and the samplers watching them and its drive.
  struct Stage {
    std::vector<std::unique_ptr<RankChannel>> ranks;
    std::unique_ptr<Samplers> samplers;
    bool gpu = false;
  };

  /// The store directories of one stage: `name` under each --store directory (one per drive),
  /// comma-separated as the rank processes' --store takes them.
  std::string stage_root(const std::string& name) const {
    std::string root;
    for (const auto& dir : split_list(store_.root))
      root += (root.empty() ? "" : ",") + (fs::path(dir) / name).string();
    return root;
  }

  void remove_stage(const std::string& root) const {
    for (const auto& dir : split_list(root)) fs::remove_all(dir);
  }

  /// The ranks of `world` over store `root`; `fresh`: the store is emptied first (unless --keep).
  Result<Stage> start_stage(const std::string& root, uint32_t chunk, uint32_t world, bool fresh) {
    if (fresh && !flags_.keep) remove_stage(root);
    announced_.clear();  // each stage's engines are new: say what they are again
    Stage stage;
    KVTIER_ASSIGN_OR_RETURN(stage.ranks, start_ranks(root, chunk, world));
    std::vector<pid_t> pids;
    std::vector<std::string> buses;
    for (size_t r = 0; r < stage.ranks.size(); ++r) {
      pids.push_back(stage.ranks[r]->pid());
      buses.push_back(hello_[r].value("pci_bus_id", ""));
    }
    std::vector<std::string> devices;
    Result<std::string> device = fail(ErrorCode::kNotFound, "no store directory");
    for (const auto& dir : split_list(root)) {
      fs::create_directories(dir);
      auto d = metrics::block_device_of(dir);
      if (devices.empty()) device = d;
      devices.push_back(d.value_or(""));
    }
    stage.samplers = std::make_unique<Samplers>(devices, pids);
    stage.samplers->start_pcie(buses);
    stage.gpu = !buses.front().empty();
    if (machine_.empty()) {
      describe_machine(*stage.samplers, device, stage.gpu);
      machine_["store_drives"] = devices.size();
      if (devices.size() > 1) machine_["store_device"] = stage.samplers->describe()["disk"];
    }
    return stage;
  }

  /// Opens every rank's engine for `path` and pays its first-use costs; false when the path does
  /// not apply here (cuFile without GPU memory).
  Result<bool> prepare_path(std::vector<std::unique_ptr<RankChannel>>& ranks, Samplers& samplers,
                            const std::string& path, uint32_t chunk, bool gpu) {
    if (path == "gds" && !gpu) {
      std::printf("-- gds: skipped (KV in host memory; GPUDirect Storage reads into GPU memory)\n");
      return false;
    }
    uint64_t dram = 0;
    if (path == "dram") {
      KVTIER_ASSIGN_OR_RETURN(dram, dram_bytes_per_rank());
    }
    KVTIER_TRY(open_all(ranks, path, dram));
    // The DRAM configuration's unique phase: the sessions saved again fill its tier.
    if (path == "dram") KVTIER_TRY(phase(ranks, samplers, "unique", path, chunk, "prefill_save"));
    KVTIER_TRY(status_of(broadcast(
        ranks,
        Json{{"op", "warm"}, {"seed", sessions_[0].seed}, {"tokens", sessions_[0].tokens}})));
    return true;
  }

  Status run_chunk(uint32_t chunk, const std::vector<std::string>& paths, bool main) {
    const std::string root = stage_root(fmt::format("seed-chunk{}", chunk));
    KVTIER_ASSIGN_OR_RETURN(Stage stage, start_stage(root, chunk, flags_.ranks, true));
    auto& ranks = stage.ranks;
    Samplers& samplers = *stage.samplers;
    const bool gpu = stage.gpu;
    std::printf("\n== chunk %u tokens: %zu sessions x %u ranks, %s; store %s\n", chunk,
                sessions_.size(), flags_.ranks, hello_.front().value("device", "").c_str(),
                root.c_str());

    // Unique phase: prefill stand-in + save, through the O_DIRECT path.
    KVTIER_TRY(open_all(ranks, "posix", 0));
    KVTIER_TRY(phase(ranks, samplers, "unique", "posix", chunk, "prefill_save"));
    for (const std::string& path : paths) {
      KVTIER_ASSIGN_OR_RETURN(bool ready, prepare_path(ranks, samplers, path, chunk, gpu));
      if (ready) KVTIER_TRY(phase(ranks, samplers, "repeat", path, chunk, "restore"));
    }
    if (main) machine_["samplers"] = samplers.describe();  // now with the sampling interval seen
    for (auto& r : ranks) (void)r->send(Json{{"op", "quit"}});
    ranks.clear();
    if (main) {
      for (uint32_t world : restore_worlds_) KVTIER_TRY(restore_at(root, chunk, world));
    }
    if (!flags_.keep) remove_stage(root);
    return {};
  }

  // The repeat phase (posix) by ranks of TP size `world` from the store the --ranks ranks saved
  // (--restore-ranks; TP-free stores): its rows are "posix TP <saved>-><world>".
  Status restore_at(const std::string& root, uint32_t chunk, uint32_t world) {
    KVTIER_ASSIGN_OR_RETURN(Stage stage, start_stage(root, chunk, world, false));
    std::printf("\n== TP %u restores what TP %u saved: %u ranks, %s; store %s\n", world,
                flags_.ranks, world, hello_.front().value("device", "").c_str(), root.c_str());
    const size_t first = rows_.size();
    KVTIER_ASSIGN_OR_RETURN(bool ready,
                            prepare_path(stage.ranks, *stage.samplers, "posix", chunk, stage.gpu));
    if (ready) KVTIER_TRY(phase(stage.ranks, *stage.samplers, "repeat", "posix", chunk, "restore"));
    for (size_t i = first; i < rows_.size(); ++i) {
      rows_[i]["config"] = fmt::format("posix TP {}->{}", flags_.ranks, world);
      rows_[i]["tp_saved"] = flags_.ranks;
      rows_[i]["tp_restored"] = world;
    }
    for (auto& r : stage.ranks) (void)r->send(Json{{"op", "quit"}});
    stage.ranks.clear();
    return {};
  }

  // N sessions restored at once per rank (N threads each), per path and N; the drive's ceiling
  // for the same N sessions read raw at once, next to each round.
  Status run_concurrency() {
    const std::vector<uint64_t>& levels = concurrency_levels_;
    const uint64_t most = *std::max_element(levels.begin(), levels.end());
    if (sessions_.size() < most) {
      KVTIER_ASSIGN_OR_RETURN(
          sessions_,
          make_sessions(WorkloadSpec{most, flags_.tokens_min, flags_.tokens_max, flags_.seed}));
    }
    const uint32_t chunk = store_.chunk_tokens;
    const std::string root = stage_root("seed-concurrency");
    KVTIER_ASSIGN_OR_RETURN(Stage stage, start_stage(root, chunk, flags_.ranks, true));
    auto& ranks = stage.ranks;
    Samplers& samplers = *stage.samplers;
    const bool gpu = stage.gpu;
    std::printf("\n== concurrency %s: %zu sessions x %u ranks, %s; store %s\n",
                flags_.concurrency.c_str(), sessions_.size(), flags_.ranks,
                hello_.front().value("device", "").c_str(), root.c_str());
    KVTIER_TRY(open_all(ranks, "posix", 0));
    KVTIER_TRY(phase(ranks, samplers, "unique", "posix", chunk, "prefill_save"));
    std::unique_ptr<HostLoad> load;
    if (flags_.host_load > 0) {
      load = std::make_unique<HostLoad>(flags_.host_load, uint64_t{512} << 20);
      std::this_thread::sleep_for(std::chrono::milliseconds(500));  // buffers allocated and touched
      load_alone_gbps_ = load->rate_over(std::chrono::seconds(2)) / 1e9;
      std::printf("-- host load: %u threads copying, %.2f GB/s alone (read + write)\n",
                  flags_.host_load, load_alone_gbps_);
    }
    for (const std::string& path : split_list(flags_.paths)) {
      KVTIER_ASSIGN_OR_RETURN(bool ready, prepare_path(ranks, samplers, path, chunk, gpu));
      for (uint64_t n : levels) {
        if (ready) KVTIER_TRY(concurrent_rounds(ranks, samplers, path, n, load.get()));
      }
    }
    for (auto& r : ranks) (void)r->send(Json{{"op", "quit"}});
    ranks.clear();
    machine_["samplers"] = samplers.describe();
    if (!flags_.keep) remove_stage(root);
    return {};
  }

  Status concurrent_rounds(std::vector<std::unique_ptr<RankChannel>>& ranks, Samplers& samplers,
                           const std::string& path, uint64_t n, const HostLoad* load) {
    // At least 16 restores per level for the p99, at least two rounds for the aggregate.
    const uint64_t rounds = std::max<uint64_t>(2, (16 + n - 1) / n);
    const bool ceiling_here = path == "posix" || path == "gds";
    cli::Progress progress(fmt::format("concurrency {} ({})", n, path));
    for (uint64_t round = 0; round < rounds; ++round) {
      Json list = Json::array();
      uint64_t kv_bytes = 0;
      for (uint64_t k = 0; k < n; ++k) {
        const SessionSpec& s = sessions_[(round * n + k) % sessions_.size()];
        list.push_back({{"seed", s.seed}, {"tokens", s.tokens}});
        kv_bytes += session_kv_bytes(s);
      }
      auto many = [&](const char* op) { return Json{{"op", op}, {"sessions", list}}; };
      KVTIER_TRY(status_of(broadcast(ranks, many("poison_many"))));
      std::optional<double> ceiling;
      auto measure_ceiling = [&]() -> Status {
        KVTIER_TRY(dropper_.drop(ranks));
        KVTIER_ASSIGN_OR_RETURN(Window c, window(ranks, samplers, many("ceiling_many")));
        ceiling = c.t1 - c.t0;
        return {};
      };
      if (ceiling_here && round % 2 == 0) KVTIER_TRY(measure_ceiling());
      KVTIER_TRY(dropper_.drop(ranks));
      // The load's bandwidth alone, right before this round: a baseline taken next to each
      // measurement, not once at the start (the VM's memory and clocks drift over a run).
      std::optional<double> load_alone;
      if (load != nullptr) load_alone = load->rate_over(std::chrono::milliseconds(500));
      const uint64_t load0 = load != nullptr ? load->bytes() : 0;
      KVTIER_ASSIGN_OR_RETURN(Window w, window(ranks, samplers, many("restore_many")));
      const uint64_t load1 = load != nullptr ? load->bytes() : 0;
      if (ceiling_here && round % 2 == 1) KVTIER_TRY(measure_ceiling());
      Json row = {{"config", path},
                  {"concurrency", n},
                  {"phase", "concurrent"},
                  {"request", round},
                  {"chunk_tokens", store_.chunk_tokens},
                  {"kv_bytes", kv_bytes}};
      // A TP request is done when its last rank is: a session's latency is its slowest rank's.
      std::vector<double> latency(n, 0);
      uint64_t restored = 0, host = 0;
      bool via_cufile = true;
      std::map<std::string, uint64_t> slots;  // every rank's staging slot time, by state
      for (const Json& reply : w.replies) {
        add_slot_times(reply, slots);
        via_cufile = via_cufile && reply.value("gds_restores", uint64_t{0}) >= n;
        for (uint64_t k = 0; k < n; ++k) {
          const Json& r = reply["results"][k];
          latency[k] = std::max(latency[k], r["seconds"].get<double>());
          restored += r["kv_bytes"].get<uint64_t>();
          host += r["host_bytes"].get<uint64_t>();
        }
      }
      row["latencies"] = latency;
      put_slot_times(row, slots);
      row["via_cufile"] = via_cufile;
      row["kv_bytes_restored"] = restored;
      row["host_bytes_accounted"] = host;
      record_window(row, w, samplers);
      if (load != nullptr) row["load_bytes"] = load1 - load0;
      if (load_alone) row["load_alone_bytes_per_s"] = *load_alone;
      if (ceiling) row["ceiling_seconds"] = *ceiling;
      KVTIER_ASSIGN_OR_RETURN(auto checks, broadcast(ranks, many("check_many")));
      bool exact = restored == kv_bytes;
      for (const Json& c : checks) {
        for (const Json& r : c["results"]) exact = exact && r["exact"].get<bool>();
      }
      row["exact"] = exact;
      rows_.push_back(std::move(row));
      progress.update(round + 1, rounds);
    }
    progress.finish();
    return {};
  }

  Status open_all(std::vector<std::unique_ptr<RankChannel>>& ranks, const std::string& path,
                  uint64_t dram) {
    KVTIER_ASSIGN_OR_RETURN(
        auto replies, broadcast(ranks,
                                Json{{"op", "open"},
                                     {"path", path == "posix" || path == "dram" ? "direct" : path},
                                     {"dram_bytes", dram}},
                                /*first_alone=*/true));
    const std::string fallback = replies[0].value("fallback", "");
    const std::string line = fmt::format(
        "-- {}: {}, requests of {} and staging {} per rank ({}){}{}", path,
        replies[0].value("io_engine", ""),
        cli::human_bytes(static_cast<double>(replies[0].value("request_bytes", uint64_t{0}))),
        cli::human_bytes(static_cast<double>(replies[0].value("staging_bytes", uint64_t{0}))),
        replies[0].value("io_settings_from", ""),
        dram > 0
            ? fmt::format(", DRAM tier {} per rank", cli::human_bytes(static_cast<double>(dram)))
            : "",
        fallback.empty() ? "" : ", fallback: " + fallback);
    // posix opens for the unique phase and again for its repeat phase: the same line twice says
    // nothing.
    if (announced_.insert(line).second) std::printf("%s\n", line.c_str());
    return {};
  }

  /// One window: `command` sent to every rank, counters read at its edges.
  struct Window {
    double t0 = 0, t1 = 0;
    Edge before, after;
    std::vector<Json> replies;
  };

  Result<Window> window(std::vector<std::unique_ptr<RankChannel>>& ranks, Samplers& samplers,
                        const Json& command) {
    Window w;
    w.before = samplers.read();
    w.t0 = metrics::steady_seconds();
    KVTIER_ASSIGN_OR_RETURN(w.replies, broadcast(ranks, command));
    w.t1 = metrics::steady_seconds();
    w.after = samplers.read();
    return w;
  }

  /// What the samplers saw inside window `w`, into `row`.
  static void record_window(Json& row, const Window& w, const Samplers& samplers) {
    const double tick = static_cast<double>(::sysconf(_SC_CLK_TCK));
    row["seconds"] = w.t1 - w.t0;
    row["disk_read_bytes"] =
        static_cast<double>(w.after.disk.bytes_read() - w.before.disk.bytes_read());
    row["disk_write_bytes"] =
        static_cast<double>(w.after.disk.bytes_written() - w.before.disk.bytes_written());
    row["machine_core_seconds"] = static_cast<double>(w.after.cpu.busy - w.before.cpu.busy) / tick;
    row["kvtier_core_seconds"] =
        static_cast<double>(w.after.kvtier_ticks - w.before.kvtier_ticks) / tick;
    if (w.before.dram_bytes && w.after.dram_bytes)
      row["host_bytes_measured"] = *w.after.dram_bytes - *w.before.dram_bytes;
    samplers.settle();  // the PCIe sampler needs a sample past the window's end
    if (auto p = samplers.pcie_bytes(w.t0, w.t1)) row["pcie_rx_bytes"] = *p;
  }

  Status phase(std::vector<std::unique_ptr<RankChannel>>& ranks, Samplers& samplers,
               const std::string& kind, const std::string& path, uint32_t chunk,
               const std::string& op) {
    cli::Progress progress(fmt::format("{} phase ({}, chunk {})", kind, path, chunk));
    const bool repeat = kind == "repeat";
    const bool ceiling_here =
        repeat && path != "buffered";  // buffered engines cannot read O_DIRECT
    for (size_t i = 0; i < sessions_.size(); ++i) {
      const SessionSpec& s = sessions_[i];
      const Json session = {{"seed", s.seed}, {"tokens", s.tokens}};
      Json row = {{"config", path}, {"chunk_tokens", chunk}, {"phase", kind},
                  {"request", i},   {"tokens", s.tokens},    {"kv_bytes", session_kv_bytes(s)}};
      auto with_op = [&](const char* name) {
        Json c = session;
        c["op"] = name;
        return c;
      };
      if (repeat) {  // the session is evicted from GPU memory, and no byte may come from the page
                     // cache
        KVTIER_TRY(status_of(broadcast(ranks, Json{{"op", "poison"}})));
      }
      KVTIER_TRY(dropper_.drop(ranks));
      std::optional<double> ceiling;
      // The DRAM tier's ceiling is the host-to-device link, the disk paths' the drive's O_DIRECT
      // read.
      const bool link = path == "dram";
      std::optional<FioRead> fio;
      auto measure_raw = [&]() -> Status {
        KVTIER_TRY(dropper_.drop(ranks));
        KVTIER_ASSIGN_OR_RETURN(
            Window c, window(ranks, samplers, with_op(link ? "copy_ceiling" : "ceiling")));
        ceiling = c.t1 - c.t0;
        if (link) ceiling_names_[path] = c.replies[0].value("what", "");
        return dropper_.drop(ranks);
      };
      auto measure_fio = [&]() -> Status {
        if (link) return {};
        fio = fio_->measure(ranks, session, dropper_);
        return dropper_.drop(ranks);
      };
      // kvtier's raw read and fio on opposite sides of the restore, swapping sides every request:
      // none of the three always finds another's bytes warm in a lower cache.
      if (ceiling_here) KVTIER_TRY(i % 2 == 0 ? measure_raw() : measure_fio());
      KVTIER_ASSIGN_OR_RETURN(Window w, window(ranks, samplers, with_op(op.c_str())));
      if (ceiling_here) KVTIER_TRY(i % 2 == 0 ? measure_fio() : measure_raw());
      record_window(row, w, samplers);
      if (ceiling) row[link ? "link_ceiling_seconds" : "ceiling_seconds"] = *ceiling;
      if (fio) {
        row["fio_seconds"] = fio->seconds;
        row["fio_bytes"] = fio->bytes;
        row["fio_core_seconds"] = fio->cpu_seconds;
      }
      if (repeat) {
        uint64_t host = 0, read = 0, restored = 0, dram_hits = 0, misses = 0;
        bool gds = true;
        std::string problem, gds_note, fallback;
        std::map<std::string, uint64_t> slots;  // every rank's staging slot time, by state
        for (const Json& r : w.replies) {
          add_slot_times(r, slots);
          host += r["host_bytes"].get<uint64_t>();
          read += r["bytes_read"].get<uint64_t>();
          restored += r["kv_bytes"].get<uint64_t>();
          dram_hits += r["dram_hits"].get<uint64_t>();
          misses += r["checksum_misses"].get<uint64_t>();
          gds = gds && r["via_gds"].get<bool>();
          if (problem.empty()) problem = r.value("problem", "");
          gds_note = r.value("gds", "");
          fallback = r.value("fallback", "");
        }
        row["host_bytes_accounted"] = host;
        put_slot_times(row, slots);
        row["bytes_read"] = read;
        row["kv_bytes_restored"] = restored;
        row["dram_hits"] = dram_hits;
        row["checksum_misses"] = misses;
        row["via_cufile"] = gds;
        if (!gds_note.empty()) gds_notes_[path] = gds_note;
        if (!fallback.empty()) fallbacks_[path] = fallback;
        if (!problem.empty()) row["problem"] = problem;
        KVTIER_ASSIGN_OR_RETURN(auto checks, broadcast(ranks, with_op("check")));
        bool exact = restored == row["kv_bytes"].get<uint64_t>();
        for (const Json& c : checks) exact = exact && c["exact"].get<bool>();
        row["exact"] = exact;
      } else {
        double prefill = 0, save = 0;
        for (const Json& r : w.replies) {
          prefill = std::max(prefill, r["prefill_seconds"].get<double>());
          save = std::max(save, r["save_seconds"].get<double>());
        }
        row["prefill_stand_in_seconds"] = prefill;
        row["save_seconds"] = save;
      }
      rows_.push_back(std::move(row));
      progress.update(i + 1, sessions_.size());
    }
    progress.finish();
    return {};
  }

  void describe_machine(const Samplers& samplers, const Result<std::string>& device, bool gpu) {
    utsname u{};
    ::uname(&u);
    std::string cpu = "unknown";
    if (auto info = read_file("/proc/cpuinfo")) {
      const auto at = info->find("model name");
      if (at != std::string::npos) {
        const auto colon = info->find(':', at);
        cpu = info->substr(colon + 2, info->find('\n', colon) - colon - 2);
      }
    }
    uint64_t mem_kb = 0;
    if (auto m = read_file("/proc/meminfo"))
      mem_kb = std::strtoull(m->c_str() + m->find(':') + 1, nullptr, 10);
    machine_ = {{"kernel", fmt::format("{} {}", u.sysname, u.release)},
                {"cpu", cpu},
                {"cores", std::thread::hardware_concurrency()},
                {"memory_gib", static_cast<double>(mem_kb) / 1048576.0},
                {"store_device", device ? *device : "unknown"},
                {"store_device_model", store_device_model(device)},
                {"gpu", gpu},
                {"rank_devices", Json::array()},
                {"page_cache", dropper_.describe()},
                {"samplers", samplers.describe()}};
    for (const Json& h : hello_) machine_["rank_devices"].push_back(h.value("device", ""));
  }

  std::string self_;
  cli::StoreFlags store_;
  SeedFlags flags_;
  std::vector<SessionSpec> sessions_;
  std::vector<uint64_t> concurrency_levels_;  // --concurrency, checked before anything is made
  std::vector<uint32_t> restore_worlds_;      // --restore-ranks
  std::vector<Json> hello_;
  std::vector<Json> rows_;
  std::map<std::string, std::string> gds_notes_, fallbacks_, ceiling_names_;
  std::unique_ptr<SeedFio> fio_;
  std::set<std::string> announced_;  // open_all's lines printed in this stage
  CacheDropper dropper_;
  double load_alone_gbps_ = 0;
  Json machine_;
  Json out_;
};

}  // namespace

int run_seed_bench(const std::string& self, cli::StoreFlags store, const SeedFlags& flags,
                   const std::string& command_line) {
  SeedRun run(self, std::move(store), flags);
  auto rc = run.run(command_line);
  if (!rc) return cli::report(rc.error(), "bench --workload seed");
  return *rc;
}

}  // namespace kvtier::seed
