// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 kvtier authors
#pragma once

#include <cstddef>
#include <cstdlib>
#include <cstring>
#include <new>
#include <span>
#include <utility>

namespace kvtier {

/// @brief Sole owner of a page-aligned host allocation (usable for O_DIRECT). Not thread-safe.
class AlignedBuffer {
 public:
  static constexpr size_t kAlignment = 4096;

  AlignedBuffer() = default;
  /// Allocates `bytes` rounded up to the alignment; throws std::bad_alloc like operator new.
  explicit AlignedBuffer(size_t bytes) : size_(bytes) {
    size_t rounded = (bytes + kAlignment - 1) / kAlignment * kAlignment;
    data_ = static_cast<std::byte*>(
        std::aligned_alloc(kAlignment, rounded == 0 ? kAlignment : rounded));
    if (data_ == nullptr) throw std::bad_alloc();
  }
  AlignedBuffer(AlignedBuffer&& o) noexcept
      : data_(std::exchange(o.data_, nullptr)), size_(std::exchange(o.size_, 0)) {}
  AlignedBuffer& operator=(AlignedBuffer&& o) noexcept {
    if (this != &o) {
      reset();
      data_ = std::exchange(o.data_, nullptr);
      size_ = std::exchange(o.size_, 0);
    }
    return *this;
  }
  AlignedBuffer(const AlignedBuffer&) = delete;
  AlignedBuffer& operator=(const AlignedBuffer&) = delete;
  ~AlignedBuffer() { reset(); }

  void reset() noexcept {
    std::free(data_);
    data_ = nullptr;
    size_ = 0;
  }
  [[nodiscard]] std::byte* data() const { return data_; }
  [[nodiscard]] size_t size() const { return size_; }
  [[nodiscard]] std::span<std::byte> span() const { return {data_, size_}; }

 private:
  std::byte* data_ = nullptr;
  size_t size_ = 0;
};

}  // namespace kvtier
