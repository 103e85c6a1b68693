// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 kvtier authors
#pragma once

#include <cstdint>
#include <expected>
#include <string>
#include <string_view>
#include <utility>

#include "kvtier/export.hpp"

namespace kvtier {

/// @brief Error codes. Each subsystem owns a stable numeric range; the CLI maps ranges to exit codes.
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

/// @brief A value or the Status explaining why there is none.
template <typename T>
using Result = std::expected<T, Status>;

/// @brief Turns a non-ok Status into the error side of a Result.
inline std::unexpected<Status> fail(Status status) { return std::unexpected(std::move(status)); }

inline std::unexpected<Status> fail(ErrorCode code, std::string message, int native_error = 0) {
  return std::unexpected(Status(code, std::move(message), native_error));
}

}  // namespace kvtier
