// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 kvtier authors
// The seed benchmark's workload, summary (medians per configuration over the repeat windows,
// ratios to the ceiling) and CSV, on hand-made rows whose answers are known.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "bench_kv.hpp"
#include "seed_table.hpp"
#include "synthetic.hpp"
#include "test_util.hpp"
#include "workload.hpp"

namespace kvtier::seed {
namespace {

using Json = nlohmann::ordered_json;

TEST(SeedWorkload, SessionsSpanTheRangeDeterministically) {
  auto a = make_sessions({20, 98058, 100022, 1});
  ASSERT_OK(a);
  ASSERT_EQ(a->size(), 20u);
  EXPECT_EQ((*a)[0].tokens, 100022u);
  EXPECT_EQ((*a)[1].tokens, 98058u);
  for (const SessionSpec& s : *a) {
    EXPECT_GE(s.tokens, 98058u);
    EXPECT_LE(s.tokens, 100022u);
  }
  auto b = make_sessions({20, 98058, 100022, 1});
  for (size_t i = 0; i < 20; ++i) {
    EXPECT_EQ((*a)[i].tokens, (*b)[i].tokens);
    EXPECT_EQ((*a)[i].seed, (*b)[i].seed);
  }
  // Distinct sessions share no prefix: their first tokens differ somewhere early.
  EXPECT_NE(synthetic::tokens((*a)[0].seed, 8), synthetic::tokens((*a)[1].seed, 8));
  EXPECT_FALSE(make_sessions({0, 1, 2, 1}));
  EXPECT_FALSE(make_sessions({3, 10, 5, 1}));
  EXPECT_FALSE(make_sessions({3, 0, 5, 1}));
}

Json repeat_row(const std::string& config, double seconds, double kv,
                std::optional<double> ceiling) {
  Json r = {{"config", config},
            {"chunk_tokens", 256},
            {"phase", "repeat"},
            {"seconds", seconds},
            {"kv_bytes", kv},
            {"kv_bytes_restored", kv},
            {"disk_read_bytes", kv},
            {"host_bytes_accounted", 2 * kv},
            {"machine_core_seconds", seconds / 2},
            {"kvtier_core_seconds", seconds / 4},
            {"exact", true},
            {"via_cufile", false},
            {"dram_hits", 0}};
  if (ceiling) r["ceiling_seconds"] = *ceiling;
  return r;
}

TEST(SeedSummary, MediansOfPerWindowRatesAndRatiosToTheCeiling) {
  std::vector<Json> rows;
  // posix: windows of 1, 2 and 4 s for 4 GB each; the ceiling read of the same records took 1 s.
  rows.push_back(repeat_row("posix", 1, 4e9, 1.0));
  rows.push_back(repeat_row("posix", 2, 4e9, 1.0));
  rows.push_back(repeat_row("posix", 4, 4e9, 1.0));
  // buffered has no ceiling of its own: it is compared with the median ceiling of the run.
  rows.push_back(repeat_row("buffered", 8, 4e9, std::nullopt));
  rows.push_back(repeat_row("buffered", 8, 4e9, std::nullopt));
  Json s = summarize(rows);
  ASSERT_EQ(s.size(), 2u);
  const Json& posix = s[0];
  EXPECT_EQ(posix["config"], "posix");
  EXPECT_DOUBLE_EQ(posix["restore_ms"].get<double>(), 2000);
  EXPECT_DOUBLE_EQ(posix["disk_read_gbps"].get<double>(), 2.0);  // median of 4, 2, 1 GB/s
  EXPECT_DOUBLE_EQ(posix["dram_accounted_gbps"].get<double>(), 4.0);
  EXPECT_TRUE(posix["dram_measured_gbps"].is_null());
  EXPECT_TRUE(posix["pcie_rx_gbps"].is_null());
  EXPECT_DOUBLE_EQ(posix["cpu_core_s"].get<double>(), 1.0);
  EXPECT_DOUBLE_EQ(posix["cpu_cores_busy"].get<double>(), 0.5);
  EXPECT_DOUBLE_EQ(posix["host_bytes_per_kv_byte"].get<double>(), 2.0);
  EXPECT_DOUBLE_EQ(posix["kvtier_core_s_per_gb"].get<double>(),
                   0.125);  // median of 0.25, 0.5, 1 core-s / 4 GB
  EXPECT_DOUBLE_EQ(posix["ratio_to_ceiling"].get<double>(), 0.5);  // median of 1, 1/2, 1/4
  EXPECT_DOUBLE_EQ(posix["ceiling_kv_gbps"].get<double>(), 4.0);
  EXPECT_EQ(posix["byte_exact"], 3u);
  const Json& buffered = s[1];
  EXPECT_DOUBLE_EQ(buffered["ratio_to_ceiling"].get<double>(),
                   0.5 / 4.0);  // 0.5 GB/s against 4 GB/s
  EXPECT_NE(buffered["ceiling_source"].get<std::string>().find("median"), std::string::npos);

  // The DRAM tier is held against the link (its own copy ceiling), not the drive.
  Json dram = repeat_row("dram", 0.5, 4e9, std::nullopt);
  dram["link_ceiling_seconds"] = 0.4;
  rows.push_back(dram);
  Json with_dram = summarize(rows);
  ASSERT_EQ(with_dram.size(), 3u);
  EXPECT_DOUBLE_EQ(with_dram[2]["ratio_to_ceiling"].get<double>(), 0.8);
  EXPECT_DOUBLE_EQ(with_dram[2]["ceiling_kv_gbps"].get<double>(), 10.0);

  const std::string table =
      render_table(s, Json{{"samplers", {{"dram_measured", false}, {"pcie", "not measured"}}}}, {});
  EXPECT_NE(table.find("| posix | 256 | 2,000 ms | 2.00 GB/s | 4.00 GB/s | n/a |"),
            std::string::npos)
      << table;
  EXPECT_NE(table.find("| 0.125 core-s | n/a | 2.00 |"), std::string::npos) << table;
  EXPECT_NE(table.find("accounted"), std::string::npos);
}

TEST(SeedSummary, RatiosToFioArePerRequestOrAgainstTheRunsMedianFioRate) {
  std::vector<Json> rows;
  // posix: 4 GB restored in 2, 4 and 8 s; fio replayed the same reads in 1, 2 and 2 s; kvtier's
  // own raw read took 1.5 s each time.
  // fio's own CPU for the 4 GB it read: 0.2, 0.4 and 0.1 core-s.
  for (auto [t, f, c] : {std::tuple{2.0, 1.0, 0.2}, {4.0, 2.0, 0.4}, {8.0, 2.0, 0.1}}) {
    Json r = repeat_row("posix", t, 4e9, 1.5);
    r["fio_seconds"] = f;
    r["fio_bytes"] = 4e9;
    r["fio_core_seconds"] = c;
    rows.push_back(r);
  }
  rows.push_back(repeat_row("buffered", 4, 4e9, std::nullopt));  // no fio of its own
  Json dram = repeat_row("dram", 1, 4e9, std::nullopt);          // the link, never fio
  dram["link_ceiling_seconds"] = 0.5;
  rows.push_back(dram);
  Json s = summarize(rows);
  ASSERT_EQ(s.size(), 3u);
  EXPECT_DOUBLE_EQ(s[0]["ratio_to_fio"].get<double>(), 0.5);        // median of 1/2, 2/4, 2/8
  EXPECT_DOUBLE_EQ(s[0]["fio_kv_gbps"].get<double>(), 2.0);         // median of 4, 2, 2 GB/s
  EXPECT_DOUBLE_EQ(s[0]["ratio_to_ceiling"].get<double>(), 0.375);  // the raw read: 1.5/4
  EXPECT_DOUBLE_EQ(s[0]["fio_core_s_per_gb"].get<double>(), 0.05);  // median of .05, .1, .025
  EXPECT_DOUBLE_EQ(s[1]["ratio_to_fio"].get<double>(), 0.5);        // 1 GB/s against the run's 2
  EXPECT_FALSE(s[2].contains("ratio_to_fio"));
  const Json fio = {{"what", "fio-3.33 replaying"},
                    {"depth_sweep", {{{"depth", 1}, {"gb_per_s", 1.5}}}}};
  const std::string table = render_table(s, Json::object(), {}, fio);
  EXPECT_NE(table.find("| 0.050 core-s | 1.00 | 2.00 | 0.50x | 2.67 | 0.38x |"), std::string::npos)
      << table;
  EXPECT_NE(table.find("fio-3.33 replaying"), std::string::npos);
  const std::string without = render_table(s, Json::object(), {}, {{"error", "fio not found"}});
  EXPECT_NE(without.find("NOT MEASURED in this run (fio not found)"), std::string::npos);
}

TEST(SeedSummary, SlotSharesAreMediansOfEachStatesShareOfTheSlotsTime) {
  std::vector<Json> rows;
  // Three restores: reading 50%, 60% and 80% of the slots' time; waiting for the device 40%, 20%
  // and 10%; the rest idle.
  for (auto [reading, device] : {std::pair{50, 40}, {60, 20}, {80, 10}}) {
    Json r = repeat_row("posix", 1, 1e9, 1.0);
    r["slot_total_ns"] = 1000;
    r["slot_reading_ns"] = reading * 10;
    r["slot_queued_ns"] = 0;
    r["slot_consuming_ns"] = 0;
    r["slot_device_wait_ns"] = device * 10;
    r["slot_refill_wait_ns"] = 0;
    rows.push_back(r);
  }
  rows.push_back(repeat_row("gds", 1, 1e9, 1.0));  // cuFile: no staging slots, no line
  Json s = summarize(rows);
  ASSERT_EQ(s.size(), 2u);
  EXPECT_DOUBLE_EQ(s[0]["slot_share_reading"].get<double>(), 0.6);
  EXPECT_DOUBLE_EQ(s[0]["slot_share_device_wait"].get<double>(), 0.2);
  const std::string table = render_table(s, Json::object(), {});
  EXPECT_NE(table.find("SLOTS posix (chunk 256):"), std::string::npos) << table;
  EXPECT_NE(table.find("a read in flight 60%"), std::string::npos) << table;
  EXPECT_NE(table.find("waiting for its copy to the device 20%"), std::string::npos) << table;
  // Idle is the median of each restore's own: 10%, 20%, 10%.
  EXPECT_NE(table.find("idle (before a slot's first piece or after its last) 10%"),
            std::string::npos)
      << table;
  EXPECT_EQ(table.find("SLOTS gds"), std::string::npos) << table;
}

TEST(SeedSummary, GdsThatFellBackOrRanInCompatModeIsNamedSo) {
  std::vector<Json> rows = {repeat_row("gds", 1, 1e9, 1.0)};
  Json s = summarize(rows);
  EXPECT_NE(render_table(s, Json::object(), {}).find("gds (NOT via cuFile"), std::string::npos);
  rows[0]["via_cufile"] = true;
  s = summarize(rows);
  const std::string t =
      render_table(s, Json::object(), {{"gds", "cuFile compat mode (no nvidia-fs)"}});
  EXPECT_NE(t.find("gds (cuFile compat mode)"), std::string::npos) << t;
}

TEST(SeedSummary, RestoresServedFromACacheAreFlagged) {
  std::vector<Json> rows = {repeat_row("posix", 1, 1e9, 1.0)};
  rows[0]["disk_read_bytes"] = 0.2e9;  // 80% of the KV came from somewhere other than the drive
  const std::string t = render_table(summarize(rows), Json::object(), {});
  EXPECT_NE(t.find("WARNING: posix (chunk 256): only 0.20 device bytes"), std::string::npos) << t;
  rows[0]["disk_read_bytes"] = 1.0e9;
  EXPECT_EQ(render_table(summarize(rows), Json::object(), {}).find("WARNING"), std::string::npos);
}

const Json kHostMachine = {
    {"gpu", false},
    {"rank_devices",
     {"host (host-emulated device; KV lands in host memory)",
      "host (host-emulated device; KV lands in host memory)"}},
    {"samplers", {{"dram_measured", false}, {"pcie", "not measured: no GPU (KV in host memory)"}}}};

TEST(SeedTable, HeadlineSaysWhetherAGpuWasUsedAndWhich) {
  const std::vector<Json> rows = {repeat_row("posix", 1, 1e9, 1.0)};
  const std::string host = render_table(summarize(rows), kHostMachine, {});
  EXPECT_EQ(host.rfind("**Host-emulated device: no GPU was used.**", 0), 0u) << host;
  Json gpu = kHostMachine;
  gpu["gpu"] = true;
  gpu["rank_devices"] = {"cuda:0 (NVIDIA H200)", "cuda:1 (NVIDIA H200)"};
  const std::string t = render_table(summarize(rows), gpu, {});
  EXPECT_EQ(t.rfind("**GPU: cuda:0 (NVIDIA H200), cuda:1 (NVIDIA H200).**", 0), 0u) << t;
  EXPECT_EQ(t.find("Host-emulated"), std::string::npos) << t;
  EXPECT_EQ(
      render_concurrency_table(Json::array(), kHostMachine, {}).rfind("**Host-emulated device", 0),
      0u);
  EXPECT_EQ(device_headline(gpu), t.substr(0, t.find('\n')));
}

TEST(SeedTable, RatiosAboveOneAndTheHostEmulatedDramRatioAreExplained) {
  std::vector<Json> rows = {repeat_row("posix", 1, 4e9, 1.2),
                            repeat_row("buffered", 0.5, 4e9, std::nullopt)};
  Json dram = repeat_row("dram", 1, 4e9, std::nullopt);
  dram["link_ceiling_seconds"] = 0.49;
  rows.push_back(dram);
  const Json s = summarize(rows);
  const std::string t = render_table(s, kHostMachine, {});
  EXPECT_NE(t.find("same I/O code"), std::string::npos) << t;  // what the ceiling was
  EXPECT_NE(t.find("- posix (chunk 256) at 1.20x: above 1x, the restore beat a raw read of the "
                   "same records"),
            std::string::npos)
      << t;
  EXPECT_NE(t.find("- buffered (chunk 256) at 2.40x: above 1x because its reads went through the "
                   "page cache"),
            std::string::npos)
      << t;
  EXPECT_NE(t.find("- dram (chunk 256) at 0.49x: on the host-emulated device"), std::string::npos)
      << t;
  EXPECT_NE(t.find("bound by that CPU copy"), std::string::npos) << t;
  // With a GPU the DRAM tier crosses a real link: no CPU-copy note; a ratio under 1 needs none.
  Json gpu = kHostMachine;
  gpu["gpu"] = true;
  const std::string with_gpu = render_table(s, gpu, {});
  EXPECT_EQ(with_gpu.find("- dram"), std::string::npos) << with_gpu;
  rows[0]["ceiling_seconds"] = 0.8;
  EXPECT_EQ(render_table(summarize(rows), gpu, {}).find("- posix"), std::string::npos);
}

TEST(SeedMachine, StoreDeviceModelIsTheKernelsOrSaysWhyItIsUnknown) {
  testing::TempDir sys;
  const auto device_dir = [&](const std::string& name) {
    const std::filesystem::path d = sys.path() / "block" / name / "device";
    std::filesystem::create_directories(d);
    return d;
  };
  std::ofstream(device_dir("nvme0n1") / "model") << "Samsung SSD 990 PRO 2TB                 \n";
  EXPECT_EQ(store_device_model(std::string("nvme0n1"), sys.path().string()),
            "Samsung SSD 990 PRO 2TB");
  const auto vda = device_dir("vda");
  std::filesystem::create_directories(sys.path() / "bus/virtio/drivers/virtio_blk");
  std::filesystem::create_symlink("../../../bus/virtio/drivers/virtio_blk", vda / "driver");
  EXPECT_EQ(store_device_model(std::string("vda"), sys.path().string()),
            "unknown (the kernel lists no model for vda; driver virtio_blk)");
  std::ofstream(device_dir("dm-0") / "model") << "  \n";
  EXPECT_EQ(store_device_model(std::string("dm-0"), sys.path().string()),
            "unknown (the kernel lists no model for dm-0)");
  // A loop device names its backing file; one in /dev/shm is RAM standing in for a drive.
  std::filesystem::create_directories(sys.path() / "block/loop0/loop");
  std::ofstream(sys.path() / "block/loop0/loop/backing_file") << "/dev/shm/fast0.img\n";
  EXPECT_EQ(store_device_model(std::string("loop0"), sys.path().string()),
            "loop device over /dev/shm/fast0.img (RAM-backed loop device standing in for NVMe: its "
            "reads are "
            "CPU copies)");
  std::filesystem::create_directories(sys.path() / "block/loop1/loop");
  std::ofstream(sys.path() / "block/loop1/loop/backing_file") << "/srv/disk.img\n";
  EXPECT_EQ(store_device_model(std::string("loop1"), sys.path().string()),
            "loop device over /srv/disk.img");
  const Result<std::string> none = fail(ErrorCode::kNotFound, "/kv has no block device in /sys");
  EXPECT_EQ(store_device_model(none, sys.path().string()),
            "unknown (/kv has no block device in /sys)");
}

std::string slurp(const std::filesystem::path& p) {
  std::ifstream in(p);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

// The report of a host-emulated run as the seed benchmark writes it, through seed_report.py.
TEST(SeedReport, HostRunIsHeadlinedAndHasNoEmptyOrDegenerateLines) {
  testing::TempDir run;
  std::vector<Json> rows = {repeat_row("posix", 1, 4e9, 0.8), repeat_row("posix", 1, 4e9, 0.8)};
  const Json summary = summarize(rows);
  Json machine = kHostMachine;
  machine["store_device"] = "vda";
  machine["store_device_model"] = "";  // as runs before the model said why wrote it
  machine["samplers"]["pcie_sample_interval_ms"] = 0.0;
  const std::string table = render_table(summary, machine, {});
  std::ofstream(run.path() / "table.md") << table;
  const Json data = {{"command", "kvtier bench --workload seed"},
                     {"headline", device_headline(machine)},
                     {"workload",
                      {{"sessions", 2},
                       {"tokens_min", 20000},
                       {"tokens_max", 20000},
                       {"seed", 1},
                       {"ranks", 2},
                       {"model", "tiny"},
                       {"chunk_tokens", 256}}},
                     {"machine", machine},
                     {"summary", summary}};
  std::ofstream(run.path() / "seed.json") << data.dump(2);
  const ReportOutcome made = make_report(run.path().string());
  if (made == ReportOutcome::kNoMatplotlib) GTEST_SKIP() << "no python3 with matplotlib";
  ASSERT_EQ(made, ReportOutcome::kMade);
  const std::string report = slurp(run.path() / "report.md");
  EXPECT_EQ(
      report.rfind("# kvtier seed evaluation\n\n**Host-emulated device: no GPU was used.**", 0), 0u)
      << report;
  EXPECT_EQ(report.find("Host-emulated device", report.find("Host-emulated device") + 1),
            std::string::npos)
      << "the headline twice:\n"
      << report;
  EXPECT_NE(report.find("Table 1. Medians"), std::string::npos) << report;
  EXPECT_NE(report.find("2 unique sessions of 20,000 tokens of tiny"), std::string::npos) << report;
  EXPECT_EQ(report.find("store device model: \n"), std::string::npos) << report;
  EXPECT_NE(report.find("store device model: unknown ("), std::string::npos) << report;
  EXPECT_EQ(report.find("sample interval ms: 0.0"), std::string::npos) << report;
  for (const char* figure : {"fig1_disk_read.png", "fig3_dram.png", "fig5_cpu.png"}) {
    EXPECT_TRUE(std::filesystem::exists(run.path() / figure)) << figure;
  }
}

TEST(SeedConcurrency, AggregateTailAndLoadPerConfigurationAndLevel) {
  auto round = [](uint64_t n, double seconds, std::vector<double> latencies, double load_bytes) {
    return Json{{"config", "posix"},
                {"concurrency", n},
                {"phase", "concurrent"},
                {"seconds", seconds},
                {"kv_bytes", 8e9},
                {"kv_bytes_restored", 8e9},
                {"host_bytes_accounted", 16e9},
                {"machine_core_seconds", 2.0 * static_cast<double>(n)},
                {"kvtier_core_seconds", 1.0 * static_cast<double>(n)},
                {"latencies", latencies},
                {"ceiling_seconds", seconds * 0.9},
                {"load_bytes", load_bytes},
                {"exact", true}};
  };
  std::vector<Json> rows = {round(4, 2, {1, 1, 1, 2}, 10e9), round(4, 4, {1, 1, 1, 1}, 30e9),
                            round(1, 1, {1}, 5e9)};
  // The four-at-once rounds' staging slots waited for the device a quarter of their time.
  for (size_t i : {0, 1}) {
    rows[i]["slot_total_ns"] = 400;
    rows[i]["slot_reading_ns"] = 200;
    rows[i]["slot_device_wait_ns"] = 100;
  }
  Json s = summarize_concurrency(rows, 20.0);
  ASSERT_EQ(s.size(), 2u);
  const Json& four = s[0];
  EXPECT_EQ(four["concurrency"], 4);
  EXPECT_DOUBLE_EQ(four["aggregate_gbps"].get<double>(), 3.0);  // median of 4 and 2 GB/s
  EXPECT_DOUBLE_EQ(four["ratio_to_ceiling"].get<double>(), 0.9);
  EXPECT_EQ(four["restores"], 8u);
  EXPECT_DOUBLE_EQ(four["p50_ms"].get<double>(), 1000);
  EXPECT_NEAR(four["p99_ms"].get<double>(), 1930, 1e-9);  // 7 ones and a two: 99% of the way to it
  EXPECT_DOUBLE_EQ(four["cpu_core_s_per_restore"].get<double>(), 2.0);
  EXPECT_DOUBLE_EQ(four["kvtier_core_s_per_restore"].get<double>(), 1.0);
  EXPECT_DOUBLE_EQ(four["host_bytes_per_kv_byte"].get<double>(), 2.0);
  EXPECT_DOUBLE_EQ(four["load_gbps"].get<double>(), 6.25);  // median of 5 and 7.5 GB/s
  EXPECT_DOUBLE_EQ(four["load_taken_gbps"].get<double>(), 13.75);
  // Rounds that carry their own baseline (measured right before each) use it, not the run's.
  rows[0]["load_alone_bytes_per_s"] = 16e9;
  rows[1]["load_alone_bytes_per_s"] = 18e9;
  const Json paired = summarize_concurrency(rows, 20.0);
  EXPECT_DOUBLE_EQ(paired[0]["load_alone_gbps"].get<double>(), 17.0);
  EXPECT_DOUBLE_EQ(paired[0]["load_taken_gbps"].get<double>(), 10.75);
  EXPECT_DOUBLE_EQ(paired[1]["load_alone_gbps"].get<double>(), 20.0);  // N=1 has none: the run's
  const std::string t = render_concurrency_table(s, Json::object(), {});
  EXPECT_NE(t.find("| posix | 4 | 3.00 |"), std::string::npos) << t;
  EXPECT_NE(t.find("| 1.00 core-s |"), std::string::npos) << t;
  EXPECT_NE(t.find("20.0 -> 6.2"), std::string::npos) << t;
  EXPECT_NE(t.find("SLOTS posix, 4 at once: "), std::string::npos) << t;
  EXPECT_NE(t.find("a read in flight 50%"), std::string::npos) << t;
  EXPECT_NE(t.find("waiting for its copy to the device 25%"), std::string::npos) << t;
  EXPECT_EQ(t.find("SLOTS posix, 1 at once"), std::string::npos) << t;  // measured none
  EXPECT_DOUBLE_EQ(quantile({}, 0.5), 0);
  EXPECT_DOUBLE_EQ(quantile({3, 1, 2}, 0.5), 2);
}

TEST(SeedCsv, OneLinePerRequestWithTheUnionOfColumns) {
  testing::TempDir dir;
  const std::string path = (dir.path() / "x.csv").string();
  write_csv({Json{{"a", 1}, {"b", "x,\"y\""}}, Json{{"a", 2}, {"c", 3.5}}}, path);
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  EXPECT_EQ(text.str(), "a,b,c\n1,\"x,\"\"y\"\"\",\n2,,3.5\n");
}

TEST(SeedBenchKv, HostCacheRoundTripsThePrefillStandInAndSeesPoison) {
  const KvGeometry g = testing::tiny_geometry();
  auto kv = BenchKv::create(g, 1000, "host", 0);
  ASSERT_OK(kv);
  const auto ids = synthetic::tokens(5, 1000);
  ASSERT_OK((*kv)->prefill(ids));
  EXPECT_EQ((*kv)->first_mismatch(ids).value(), 1000u);
  EXPECT_EQ((*kv)->first_mismatch(synthetic::tokens(6, 1000)).value(), 0u);
  ASSERT_OK((*kv)->poison());
  EXPECT_EQ((*kv)->first_mismatch(ids).value(), 0u);
  EXPECT_FALSE(BenchKv::create(g, 10, "tpu", 0));
  EXPECT_EQ((*kv)->prefill(synthetic::tokens(5, 2000)).code(), ErrorCode::kInvalidArgument);
}

// A TP-free store restores at one TP size what another saved: the stand-in's bytes for a head
// must not depend on the TP size of the rank that holds it.
TEST(SeedBenchKv, ARanksRowsAreItsHeadsSliceOfTheWholeModelsRowsAtEveryTpSize) {
  constexpr uint64_t kTokens = 300;
  const auto ids = synthetic::tokens(9, kTokens);
  for (const char* model : {"llama-3-8b", "deepseek-v3"}) {
    auto whole_g = geometry_for(model, 0, 1, 64);
    ASSERT_OK(whole_g);
    auto whole = BenchKv::create(*whole_g, kTokens, "host", 0);
    ASSERT_OK(whole);
    ASSERT_OK((*whole)->prefill(ids));
    for (uint32_t world : {2u, 4u, 8u}) {
      for (uint32_t rank = 0; rank < world; ++rank) {
        SCOPED_TRACE(::testing::Message() << model << " TP " << world << " rank " << rank);
        auto g = geometry_for(model, rank, world, 64);
        ASSERT_OK(g);
        auto part = BenchKv::create(*g, kTokens, "host", 0);
        ASSERT_OK(part);
        ASSERT_OK((*part)->prefill(ids));
        const PagedKv& a = (*whole)->view();
        const PagedKv& b = (*part)->view();
        ASSERT_TRUE(std::ranges::equal(a.block_table, b.block_table));
        const uint64_t rows = uint64_t{g->kv_tensors} * a.num_blocks * a.block_size;
        const uint64_t offset = synthetic::first_word(*g) * 8;
        EXPECT_EQ(offset, g->kv_tensors == 1 ? 0 : uint64_t{rank} * g->row_bytes());
        for (uint32_t l = 0; l < g->layers; ++l) {
          for (uint64_t r = 0; r < rows; ++r) {
            ASSERT_EQ(
                std::memcmp(b.layers[l].data + r * g->row_bytes(),
                            a.layers[l].data + r * whole_g->row_bytes() + offset, g->row_bytes()),
                0)
                << "layer " << l << " row " << r;
          }
        }
      }
    }
  }
}

}  // namespace
}  // namespace kvtier::seed
