// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 kvtier authors
#pragma once

#include <cstdint>
#include <expected>
#include <optional>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>

#include "kvtier/export.hpp"

namespace kvtier {

/// @brief Error codes. Each subsystem owns a stable numeric range; the CLI maps ranges to exit
/// codes.
enum class ErrorCode : int32_t {
  kOk = 0,
  // 100-199: caller errors.
  kInvalidArgument = 100,
  kNotSupported = 101,
  // 200-299: store state.
  kNotFound = 200,
  kCorrupt = 201,
  kGeometryMismatch = 202,
  kFormatVersion = 203,
  kLocked = 204,
  kCapacity = 205,
  kChecksumMismatch = 206,
  // 300-399: operating system and I/O.
  kIo = 300,
  kNoSpace = 301,
  kPermission = 302,
  kDevice = 303,  ///< CUDA or cuFile reported an error (native_error holds its code)
  // 900-999: internal invariants.
  kInternal = 900,
};

/// @brief Name of an error code, e.g. "kCorrupt" -> "corrupt".
KVTIER_EXPORT std::string_view error_code_name(ErrorCode code);

/// @brief Outcome of an operation: a code, the native error behind it (errno, or 0) and a message.
///
/// Cheap to copy when ok. Thread-compatible (immutable after construction).
class [[nodiscard]] KVTIER_EXPORT Status {
 public:
  Status() = default;
  Status(ErrorCode code, std::string message, int native_error = 0)
      : code_(code), native_error_(native_error), message_(std::move(message)) {}

  static Status ok_status() { return {}; }

  [[nodiscard]] bool ok() const { return code_ == ErrorCode::kOk; }
  [[nodiscard]] ErrorCode code() const { return code_; }
  /// errno (or another native error) that caused this status; 0 when none.
  [[nodiscard]] int native_error() const { return native_error_; }
  [[nodiscard]] const std::string& message() const { return message_; }
  /// "corrupt: segment 3: header checksum mismatch (errno 5: Input/output error)".
  [[nodiscard]] std::string to_string() const;
  /// Prefixes the message with context, keeping code and native error.
  [[nodiscard]] Status with_context(std::string_view context) const;

 private:
  ErrorCode code_ = ErrorCode::kOk;
  int native_error_ = 0;
  std::string message_;
};

// Result is std::expected for every consumer: the library's ABI must not depend on what the
// consumer's standard library has. The stand-in below is for kvtier's own fuzz build only (clang 14
// with libstdc++ 12, which lacks std::expected), a build nothing links against.
#if defined(__cpp_lib_expected)
/// @brief A value or the Status explaining why there is none.
template <typename T>
using Result = std::expected<T, Status>;
using Failure = std::unexpected<Status>;
#elif !defined(KVTIER_FUZZ_BUILD_WITHOUT_EXPECTED)
#error \
    "kvtier's API returns std::expected: compile with -std=c++23 and a standard library that has <expected> (GCC 12+, clang 16+)"
#else
/// The error side of a Result in the fuzz build (see above).
class Failure {
 public:
  explicit Failure(Status s) : status_(std::move(s)) {}
  [[nodiscard]] Status& error() & { return status_; }
  [[nodiscard]] Status&& error() && { return std::move(status_); }

 private:
  Status status_;
};

/// @brief A value or the Status explaining why there is none: the subset of std::expected that
/// kvtier uses.
template <typename T>
class [[nodiscard]] Result {
 public:
  template <typename U = T, typename = std::enable_if_t<std::is_constructible_v<T, U&&>>>
  Result(U&& value) : value_(std::forward<U>(value)) {}  // NOLINT(google-explicit-constructor)
  Result(Failure f) : error_(std::move(f).error()) {}    // NOLINT(google-explicit-constructor)

  [[nodiscard]] bool has_value() const { return value_.has_value(); }
  explicit operator bool() const { return has_value(); }
  T& value() & { return *value_; }
  const T& value() const& { return *value_; }
  T&& value() && { return std::move(*value_); }
  T& operator*() & { return *value_; }
  const T& operator*() const& { return *value_; }
  T&& operator*() && { return std::move(*value_); }
  T* operator->() { return &*value_; }
  const T* operator->() const { return &*value_; }
  const Status& error() const& { return error_; }
  Status&& error() && { return std::move(error_); }
  template <typename U>
  T value_or(U&& fallback) const& {
    return value_ ? *value_ : static_cast<T>(std::forward<U>(fallback));
  }

 private:
  std::optional<T> value_;
  Status error_;
};
#endif

/// @brief Turns a non-ok Status into the error side of a Result.
inline Failure fail(Status status) { return Failure(std::move(status)); }

inline Failure fail(ErrorCode code, std::string message, int native_error = 0) {
  return Failure(Status(code, std::move(message), native_error));
}

}  // namespace kvtier
