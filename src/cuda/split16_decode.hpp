// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 kvtier authors
// Decoding split16 streams (codec/split16.hpp) on the GPU: one thread block per codec block, so a
// record's blocks decode at once. Plain C++ interface: no CUDA headers needed to call it.
#pragma once

#include <cstdint>

#include "codec/split16_format.hpp"

namespace kvtier::cuda {

using Stream = void*;  // cudaStream_t

/// Decodes `count` blocks of a stream whose block data is in device memory at `data` (the stream's
/// first byte plus its table's data_offset) into `out` (device memory, 2-byte aligned, the decoded
/// payload; an odd payload's last byte is the caller's). `blocks` is the stream's checked table
/// (codec::split16_table), in device memory. A block whose own data contradicts the table (its
/// escapes, or a code outside its codebook) sets `*bad` (device memory) non-zero and leaves its
/// words unwritten: the caller counts the record as damaged. Returns a cudaError_t.
int launch_split16_decode(const codec::Split16Block* blocks, uint32_t count, const uint8_t* data,
                          uint8_t* out, unsigned int* bad, Stream stream);

/// Decodes a whole stream in device memory at `stream` (header, table, blocks) whose header and
/// table the host has checked from the same bytes (codec::split16_table): `blocks` blocks of a
/// payload of `decoded_bytes`, into `out` (device memory, 2-byte aligned, decoded_bytes long; an
/// odd payload's last byte included). `table` is device scratch for `blocks` Split16Block, filled
/// from the stream's entries on the device so that no host copy waits on the stream. Damage:
/// `*bad`, as launch_split16_decode. Returns a cudaError_t.
int launch_split16_decode_stream(const uint8_t* stream, uint32_t blocks, uint64_t decoded_bytes,
                                 codec::Split16Block* table, uint8_t* out, unsigned int* bad,
                                 Stream cuda_stream);

}  // namespace kvtier::cuda
