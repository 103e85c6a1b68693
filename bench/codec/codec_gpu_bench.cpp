// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 kvtier authors
// The split16 codec decoded on the GPU (issue 28), on files of KV bytes (bench/codec/forward_kv.py
// writes forward-pass KV): each file cut into records as a store holds them, encoded on the CPU,
// every stream copied to device memory once, then all records decoded with the engine's kernel
// (launch_split16_decode_stream, one launch pair a record, as a restore issues them) and checked
// once against the file. Next to it, in the same run: a device-to-device copy of the raw bytes (the
// ceiling of a kernel that reads and writes device memory) and pinned host-to-device copies of the
// raw and the coded bytes (what crossing PCIe costs each way). One JSON line per file.
//
// Usage: kvtier_codec_gpu_bench FILE... [--record-bytes N] [--repeats N]
//        (records of 2 MiB, as the store's, and 20 timed repeats after 2 warm-ups, by default)
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "codec/split16.hpp"
#include "common/posix.hpp"
#include "cuda/split16_decode.hpp"
#include "metrics/counters.hpp"

namespace {

using kvtier::codec::Split16Block;

constexpr int kWarmups = 2;

[[noreturn]] void die(const std::string& what) {
  std::fprintf(stderr, "codec_gpu_bench: %s\n", what.c_str());
  std::exit(1);
}

void check(cudaError_t e, const char* what) {
  if (e != cudaSuccess) die(std::string(what) + ": " + cudaGetErrorString(e));
}

/// Device memory of one allocation, freed with its owner.
template <typename T>
struct DeviceArray {
  T* p = nullptr;
  explicit DeviceArray(size_t count) {
    check(cudaMalloc(reinterpret_cast<void**>(&p), std::max<size_t>(count, 1) * sizeof(T)),
          "cudaMalloc");
  }
  DeviceArray(const DeviceArray&) = delete;
  DeviceArray& operator=(const DeviceArray&) = delete;
  ~DeviceArray() { cudaFree(p); }
};

/// Pinned host memory (what a store's staging is), so that copies run at the link's rate.
struct PinnedBytes {
  uint8_t* p = nullptr;
  explicit PinnedBytes(size_t bytes) {
    check(cudaHostAlloc(reinterpret_cast<void**>(&p), std::max<size_t>(bytes, 1),
                        cudaHostAllocDefault),
          "cudaHostAlloc");
  }
  PinnedBytes(const PinnedBytes&) = delete;
  PinnedBytes& operator=(const PinnedBytes&) = delete;
  ~PinnedBytes() { cudaFreeHost(p); }
};

struct Events {
  cudaEvent_t begin{}, end{};
  Events() {
    check(cudaEventCreate(&begin), "cudaEventCreate");
    check(cudaEventCreate(&end), "cudaEventCreate");
  }
  Events(const Events&) = delete;
  Events& operator=(const Events&) = delete;
  ~Events() {
    cudaEventDestroy(begin);
    cudaEventDestroy(end);
  }
};

/// The median seconds of `work` enqueued on `stream`, timed by events, after kWarmups untimed runs.
template <typename Work>
double median_seconds(cudaStream_t stream, int repeats, Work&& work) {
  Events ev;
  for (int i = 0; i < kWarmups; ++i) work();
  std::vector<double> t;
  for (int i = 0; i < repeats; ++i) {
    check(cudaEventRecord(ev.begin, stream), "cudaEventRecord");
    work();
    check(cudaEventRecord(ev.end, stream), "cudaEventRecord");
    check(cudaEventSynchronize(ev.end), "cudaEventSynchronize");
    float ms = 0;
    check(cudaEventElapsedTime(&ms, ev.begin, ev.end), "cudaEventElapsedTime");
    t.push_back(ms / 1e3);
  }
  return kvtier::metrics::median(std::move(t)).value_or(0);
}

/// Dies unless `path` opens and holds a byte: checked for every file before the GPU is asked for.
void check_readable(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) die(path + ": cannot be read");
  if (in.peek() == std::ifstream::traits_type::eof()) {
    die(path + (in.bad() ? ": cannot be read" : ": is empty"));
  }
}

std::vector<std::byte> read_file(const std::string& path) {
  check_readable(path);
  auto text = kvtier::read_file(path);
  if (!text || text->empty()) die(path + ": " + (text ? "is empty" : text.error().to_string()));
  std::vector<std::byte> raw(text->size());
  std::memcpy(raw.data(), text->data(), text->size());
  return raw;
}

/// One record's stream inside the coded bytes, and where its table scratch and output lie.
struct Record {
  size_t stored_at = 0, stored = 0;
  size_t out_at = 0, raw = 0;
  size_t table_at = 0;
  uint32_t blocks = 0;
};

/// Every record of `raw` encoded back to back into `coded`; the tables are checked on the host, as
/// the engine does before it lets the GPU trust them.
std::vector<Record> encode_records(const std::string& path, const std::vector<std::byte>& raw,
                                   size_t record_bytes, std::vector<std::byte>& coded) {
  std::vector<Record> records;
  std::vector<std::byte> stored(kvtier::codec::split16_bound(record_bytes));
  size_t tables = 0;
  for (size_t at = 0; at < raw.size(); at += record_bytes) {
    const size_t n = std::min(record_bytes, raw.size() - at);
    auto size = kvtier::codec::split16_encode(std::span(raw.data() + at, n), stored);
    if (!size) die(path + ": " + size.error().to_string());
    auto table = kvtier::codec::split16_table(std::span(stored.data(), *size));
    if (!table) die(path + ": " + table.error().to_string());
    const auto blocks = static_cast<uint32_t>(table->blocks.size());
    records.push_back({coded.size(), *size, at, n, tables, blocks});
    coded.insert(coded.end(), stored.begin(), stored.begin() + static_cast<ptrdiff_t>(*size));
    tables += blocks;
  }
  return records;
}

struct Decoder {
  const std::vector<Record>& records;
  const uint8_t* coded;
  Split16Block* tables;
  uint8_t* out;
  unsigned int* bad;
  cudaStream_t stream;

  void operator()() const {
    for (const Record& r : records) {
      check(static_cast<cudaError_t>(kvtier::cuda::launch_split16_decode_stream(
                coded + r.stored_at, r.blocks, r.raw, tables + r.table_at, out + r.out_at, bad,
                stream)),
            "launch_split16_decode_stream");
    }
  }
};

/// The same launches captured once into a graph, so that the kernels' rate is seen without the
/// host's launch cost; nullopt (and why, on stderr) where capture fails: the figure is extra.
std::optional<double> graph_seconds(const Decoder& decode, int repeats) {
  cudaGraph_t graph{};
  cudaError_t e = cudaStreamBeginCapture(decode.stream, cudaStreamCaptureModeThreadLocal);
  if (e == cudaSuccess) {
    decode();
    e = cudaStreamEndCapture(decode.stream, &graph);
  }
  cudaGraphExec_t exec{};
  if (e == cudaSuccess) e = cudaGraphInstantiate(&exec, graph, 0);
  if (e != cudaSuccess) {
    std::fprintf(stderr, "codec_gpu_bench: no graph of the decode: %s\n", cudaGetErrorString(e));
    if (graph != nullptr) cudaGraphDestroy(graph);
    return std::nullopt;
  }
  const double s = median_seconds(decode.stream, repeats, [&] {
    check(cudaGraphLaunch(exec, decode.stream), "cudaGraphLaunch");
  });
  cudaGraphExecDestroy(exec);
  cudaGraphDestroy(graph);
  return s;
}

/// What one file gave: its sizes and the median seconds of each transfer.
struct Measured {
  size_t raw = 0, stored = 0, records = 0;
  double h2d_raw = 0, h2d_coded = 0, d2d = 0, decode = 0;
  std::optional<double> decode_graph;
  unsigned int bad = 0;
  bool exact = false;
};

Measured measure(const std::string& path, size_t record_bytes, int repeats, cudaStream_t stream) {
  const std::vector<std::byte> raw = read_file(path);
  std::vector<std::byte> coded;
  const std::vector<Record> records = encode_records(path, raw, record_bytes, coded);
  Measured m{raw.size(), coded.size(), records.size()};

  PinnedBytes host_raw(raw.size()), host_coded(coded.size());
  std::memcpy(host_raw.p, raw.data(), raw.size());
  std::memcpy(host_coded.p, coded.data(), coded.size());
  DeviceArray<uint8_t> dev_raw(raw.size()), dev_coded(coded.size()), out(raw.size());
  DeviceArray<Split16Block> tables(records.back().table_at + records.back().blocks);
  DeviceArray<unsigned int> bad(1);

  auto copy = [&](void* dst, const void* src, size_t n, cudaMemcpyKind kind) {
    return [=] { check(cudaMemcpyAsync(dst, src, n, kind, stream), "cudaMemcpyAsync"); };
  };
  // The timed copies also put both forms on the device for what follows.
  m.h2d_raw = median_seconds(stream, repeats,
                             copy(dev_raw.p, host_raw.p, raw.size(), cudaMemcpyHostToDevice));
  m.h2d_coded = median_seconds(
      stream, repeats, copy(dev_coded.p, host_coded.p, coded.size(), cudaMemcpyHostToDevice));
  m.d2d =
      median_seconds(stream, repeats, copy(out.p, dev_raw.p, raw.size(), cudaMemcpyDeviceToDevice));
  // The D2D copy left the right bytes in `out`: a fill, so that only the decoder can put them back.
  check(cudaMemsetAsync(out.p, 0xA5, raw.size(), stream), "cudaMemsetAsync");
  check(cudaMemsetAsync(bad.p, 0, sizeof(unsigned int), stream), "cudaMemsetAsync");

  const Decoder decode{records, dev_coded.p, tables.p, out.p, bad.p, stream};
  m.decode = median_seconds(stream, repeats, decode);
  m.decode_graph = graph_seconds(decode, repeats);

  std::vector<std::byte> back(raw.size());
  check(cudaMemcpyAsync(back.data(), out.p, raw.size(), cudaMemcpyDeviceToHost, stream),
        "copy back");
  check(cudaMemcpyAsync(&m.bad, bad.p, sizeof m.bad, cudaMemcpyDeviceToHost, stream), "copy back");
  check(cudaStreamSynchronize(stream), "cudaStreamSynchronize");
  m.exact = m.bad == 0 && std::memcmp(back.data(), raw.data(), raw.size()) == 0;
  return m;
}

/// GB/s to two decimals (a line a reader can scan; the timings do not hold more).
double gbps(size_t bytes, double seconds) {
  return seconds > 0 ? std::round(static_cast<double>(bytes) / seconds / 1e7) / 100 : 0;
}

/// Rates in GB/s count the decoded (raw) bytes for the decoder and the D2D copy alike, so that
/// they compare; each H2D copy counts the bytes it moves.
nlohmann::ordered_json report(const std::string& path, const Measured& m, size_t record_bytes,
                              int repeats) {
  nlohmann::ordered_json j;
  j["file"] = path;
  j["codec"] = "split16";
  j["raw_bytes"] = m.raw;
  j["stored_bytes"] = m.stored;
  j["ratio"] = std::round(static_cast<double>(m.raw) / static_cast<double>(m.stored) * 1e4) / 1e4;
  j["records"] = m.records;
  j["record_bytes"] = record_bytes;
  j["repeats"] = repeats;
  j["decode_GBps"] = gbps(m.raw, m.decode);
  j["decode_graph_GBps"] =
      m.decode_graph ? nlohmann::json(gbps(m.raw, *m.decode_graph)) : nlohmann::json(nullptr);
  j["d2d_GBps"] = gbps(m.raw, m.d2d);
  j["h2d_raw_GBps"] = gbps(m.raw, m.h2d_raw);
  j["h2d_coded_GBps"] = gbps(m.stored, m.h2d_coded);
  // Serial: the coded bytes cross PCIe, then are decoded; the figure to set against h2d_raw_GBps.
  j["kv_via_coded_h2d_GBps"] = gbps(m.raw, m.h2d_coded + m.decode);
  j["byte_exact"] = m.exact;
  j["bad"] = m.bad;
  return j;
}

size_t positive(const char* flag, const char* text) {
  char* end = nullptr;
  const unsigned long long v = std::strtoull(text, &end, 10);
  if (end == text || *end != '\0' || v == 0) die(std::string(flag) + " wants a positive integer");
  return v;
}

}  // namespace

int main(int argc, char** argv) {
  const char* usage = "usage: kvtier_codec_gpu_bench FILE... [--record-bytes N] [--repeats N]\n";
  std::vector<std::string> files;
  size_t record_bytes = size_t{2} << 20;
  int repeats = 20;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "-h" || a == "--help") {
      std::printf("%s", usage);
      return 0;
    }
    if (a == "--record-bytes" && i + 1 < argc) {
      record_bytes = positive("--record-bytes", argv[++i]);
    } else if (a == "--repeats" && i + 1 < argc) {
      repeats = static_cast<int>(positive("--repeats", argv[++i]));
    } else {
      files.push_back(a);
    }
  }
  if (files.empty()) {
    std::fprintf(stderr, "%s", usage);
    return 2;
  }
  // Each record's output starts a run of 16-bit words (the decoder writes them whole).
  if (record_bytes % 2 != 0) die("--record-bytes must be even");
  for (const auto& f : files) check_readable(f);
  int devices = 0;
  if (cudaError_t e = cudaGetDeviceCount(&devices); e != cudaSuccess || devices == 0) {
    die(std::string("no CUDA GPU: ") + (e != cudaSuccess ? cudaGetErrorString(e) : "none found"));
  }
  check(cudaSetDevice(0), "cudaSetDevice");
  cudaDeviceProp prop{};
  check(cudaGetDeviceProperties(&prop, 0), "cudaGetDeviceProperties");
  cudaStream_t stream{};
  check(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), "cudaStreamCreate");
  int rc = 0;
  for (const auto& f : files) {
    const Measured m = measure(f, record_bytes, repeats, stream);
    nlohmann::ordered_json j = report(f, m, record_bytes, repeats);
    j["gpu"] = prop.name;
    std::printf("%s\n", j.dump().c_str());
    std::fflush(stdout);
    if (!m.exact) {
      std::fprintf(stderr, "codec_gpu_bench: %s did not decode to its bytes on the GPU\n",
                   f.c_str());
      rc = 1;
    }
  }
  cudaStreamDestroy(stream);
  return rc;
}
