// Inside tools/state_file/: one describer per kind of file, each given the file's bytes (mapped
// read-only), and the small formatting helpers they share.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>

#include "tools/state_file/read.h"

namespace shmipam::tools::state_file {

// Index and block arenas (arena.cpp): header magic, version, checksum and geometry checked.
Expected<FileDescription> describe_index(std::span<const std::byte> bytes);
Expected<FileDescription> describe_block(std::span<const std::byte> bytes);
// Journal segment `segment` and the checkpoint covering records below `covered` (journal.cpp).
Expected<FileDescription> describe_segment(std::span<const std::byte> bytes, uint64_t segment);
Expected<FileDescription> describe_checkpoint(std::span<const std::byte> bytes, uint64_t covered);

std::string hex(uint64_t v, int digits = 16);
std::string uuid(const uint8_t (&b)[16]);
// A fixed NUL-padded text field as text (stops at the first NUL or the end).
std::string text_of(const char* p, size_t cap);
std::string address_of(uint8_t family, const uint8_t (&be)[16]);
// The address `offset` past `base` (slot i of a block is base + i).
std::string address_at(uint8_t family, const uint8_t (&base)[16], uint64_t offset);
// UTC, to the second, for a unix-ns timestamp ("-" for 0): when a person reads a bug report.
std::string utc(uint64_t unix_ns);

}  // namespace shmipam::tools::state_file
