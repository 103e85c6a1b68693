// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 kvtier authors
#include <cstring>

#include <fmt/format.h>

#include "kvtier/status.hpp"

namespace kvtier {

std::string_view error_code_name(ErrorCode code) {
  switch (code) {
    case ErrorCode::kOk:
      return "ok";
    case ErrorCode::kInvalidArgument:
      return "invalid argument";
    case ErrorCode::kNotSupported:
      return "not supported";
    case ErrorCode::kNotFound:
      return "not found";
    case ErrorCode::kCorrupt:
      return "corrupt";
    case ErrorCode::kGeometryMismatch:
      return "geometry mismatch";
    case ErrorCode::kFormatVersion:
      return "format version";
    case ErrorCode::kLocked:
      return "locked";
    case ErrorCode::kCapacity:
      return "capacity";
    case ErrorCode::kChecksumMismatch:
      return "checksum mismatch";
    case ErrorCode::kIo:
      return "I/O error";
    case ErrorCode::kNoSpace:
      return "no space";
    case ErrorCode::kPermission:
      return "permission denied";
    case ErrorCode::kDevice:
      return "device error";
    case ErrorCode::kInternal:
      return "internal error";
  }
  return "unknown";
}

std::string Status::to_string() const {
  if (ok()) return "ok";
  std::string text = fmt::format("{}: {}", error_code_name(code_), message_);
  if (native_error_ != 0) {
    text += fmt::format(" (errno {}: {})", native_error_, std::strerror(native_error_));
  }
  return text;
}

Status Status::with_context(std::string_view context) const {
  if (ok()) return *this;
  return Status(code_, fmt::format("{}: {}", context, message_), native_error_);
}

}  // namespace kvtier
