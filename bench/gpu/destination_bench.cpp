// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 kvtier authors
// Where a read's time goes besides the drive: the same O_DIRECT reads (kvtier's pattern: request
// size, requests in flight, one reader per rank) into a plain malloc'd buffer, into pinned host
// memory, and into pinned memory followed by a copy of each request to the GPU. Written against
// liburing and the CUDA runtime directly, none of kvtier's code: it separates what the destination
// costs on a drive from what kvtier's pipeline costs.
//
// Usage: kvtier_destination_bench --request BYTES --depth N --dest plain|pinned|pinned+h2d
//          --rank FILE[,FILE...] [--rank FILE,...]   (one thread per --rank, all at once)
// Prints one JSON line: bytes, seconds (first submission to last completion of the slowest rank).
#include <fcntl.h>
#include <liburing.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <cuda_runtime.h>

namespace {

struct Args {
  size_t request = 16 << 20;
  unsigned depth = 8;
  std::string dest = "pinned";
  std::vector<std::vector<std::string>> ranks;
};

[[noreturn]] void die(const std::string& what) {
  std::fprintf(stderr, "destination_bench: %s\n", what.c_str());
  std::exit(2);
}

void check(cudaError_t e, const char* what) {
  if (e != cudaSuccess) die(std::string(what) + ": " + cudaGetErrorString(e));
}

struct RankResult {
  uint64_t bytes = 0;
  double seconds = 0;
};

/// Reads every file of one rank whole, `depth` requests of `request` bytes in flight.
RankResult read_rank(const Args& a, const std::vector<std::string>& files, int rank) {
  const bool pinned = a.dest != "plain";
  const bool h2d = a.dest == "pinned+h2d";
  std::vector<std::byte*> slots(a.depth);
  for (auto& s : slots) {
    if (pinned)
      check(cudaHostAlloc(reinterpret_cast<void**>(&s), a.request, cudaHostAllocDefault),
            "cudaHostAlloc");
    else if (posix_memalign(reinterpret_cast<void**>(&s), 4096, a.request) != 0)
      die("posix_memalign");
    std::memset(s, 0, a.request);  // resident before timing, like a staging pool
  }
  void* device = nullptr;
  cudaStream_t stream{};
  if (h2d) {
    check(cudaSetDevice(0), "cudaSetDevice");
    check(cudaMalloc(&device, a.request * a.depth), "cudaMalloc");
    check(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), "cudaStreamCreate");
  }
  struct Piece {
    int fd;
    uint64_t offset;
    uint32_t length;
  };
  std::vector<Piece> pieces;
  std::vector<int> fds;
  for (const auto& f : files) {
    const int fd = ::open(f.c_str(), O_RDONLY | O_DIRECT);
    if (fd < 0) die("open " + f + ": " + std::strerror(errno));
    fds.push_back(fd);
    const off_t size = ::lseek(fd, 0, SEEK_END) / 4096 * 4096;
    for (off_t at = 0; at < size; at += static_cast<off_t>(a.request)) {
      pieces.push_back(
          {fd, static_cast<uint64_t>(at),
           static_cast<uint32_t>(std::min<off_t>(static_cast<off_t>(a.request), size - at))});
    }
  }
  io_uring ring{};
  if (io_uring_queue_init(std::max(8u, a.depth * 2), &ring, 0) < 0) die("io_uring_queue_init");
  RankResult r;
  size_t next = 0, done = 0;
  std::vector<size_t> piece_of(a.depth);
  auto submit = [&](size_t slot) {
    const Piece& p = pieces[next];
    piece_of[slot] = next++;
    io_uring_sqe* sqe = io_uring_get_sqe(&ring);
    io_uring_prep_read(sqe, p.fd, slots[slot], p.length, p.offset);
    io_uring_sqe_set_data64(sqe, slot);
  };
  const auto t0 = std::chrono::steady_clock::now();
  for (size_t s = 0; s < a.depth && next < pieces.size(); ++s) submit(s);
  io_uring_submit(&ring);
  while (done < pieces.size()) {
    io_uring_cqe* cqe = nullptr;
    if (io_uring_wait_cqe(&ring, &cqe) < 0) die("io_uring_wait_cqe");
    const size_t slot = io_uring_cqe_get_data64(cqe);
    const Piece& p = pieces[piece_of[slot]];
    if (cqe->res != static_cast<int>(p.length))
      die("short or failed read: " + std::to_string(cqe->res));
    io_uring_cqe_seen(&ring, cqe);
    r.bytes += p.length;
    ++done;
    if (h2d) {  // the bounce path's copy of this request, done before its slot is read into again
      check(cudaMemcpyAsync(static_cast<std::byte*>(device) + slot * a.request, slots[slot],
                            p.length, cudaMemcpyHostToDevice, stream),
            "cudaMemcpyAsync");
      check(cudaStreamSynchronize(stream), "cudaStreamSynchronize");
    }
    if (next < pieces.size()) {
      submit(slot);
      io_uring_submit(&ring);
    }
  }
  r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  io_uring_queue_exit(&ring);
  for (int fd : fds) ::close(fd);
  for (auto* s : slots) {
    if (pinned)
      cudaFreeHost(s);
    else
      std::free(s);
  }
  if (h2d) {
    cudaFree(device);
    cudaStreamDestroy(stream);
  }
  (void)rank;
  return r;
}

Args parse(int argc, char** argv) {
  Args a;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string k = argv[i], v = argv[i + 1];
    if (k == "--request")
      a.request = std::strtoull(v.c_str(), nullptr, 10);
    else if (k == "--depth")
      a.depth = static_cast<unsigned>(std::strtoul(v.c_str(), nullptr, 10));
    else if (k == "--dest")
      a.dest = v;
    else if (k == "--rank") {
      auto& files = a.ranks.emplace_back();
      std::stringstream in(v);
      for (std::string f; std::getline(in, f, ',');) files.push_back(f);
    } else
      die("unknown option " + k);
  }
  if (a.ranks.empty() || a.depth == 0 || a.request % 4096 != 0)
    die("need --rank FILES, --depth >= 1, 4 KiB requests");
  if (a.dest != "plain" && a.dest != "pinned" && a.dest != "pinned+h2d")
    die("--dest plain|pinned|pinned+h2d");
  return a;
}

}  // namespace

int main(int argc, char** argv) {
  const Args a = parse(argc, argv);
  if (a.dest != "plain") check(cudaFree(nullptr), "CUDA init");  // outside the timed reads
  std::vector<RankResult> results(a.ranks.size());
  std::vector<std::thread> threads;
  for (size_t r = 0; r < a.ranks.size(); ++r) {
    threads.emplace_back([&, r] { results[r] = read_rank(a, a.ranks[r], static_cast<int>(r)); });
  }
  for (auto& t : threads) t.join();
  uint64_t bytes = 0;
  double seconds = 0;
  for (const auto& r : results) {
    bytes += r.bytes;
    seconds = std::max(seconds, r.seconds);
  }
  std::printf(
      "{\"dest\": \"%s\", \"request\": %zu, \"depth\": %u, \"ranks\": %zu, \"bytes\": %llu, "
      "\"seconds\": %.4f, "
      "\"gb_per_s\": %.3f}\n",
      a.dest.c_str(), a.request, a.depth, a.ranks.size(), static_cast<unsigned long long>(bytes),
      seconds, static_cast<double>(bytes) / seconds / 1e9);
  return 0;
}
