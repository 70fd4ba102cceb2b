// Reads one state file on its own (index, block arena, journal segment, checkpoint) into a
// description that shmipamctl dump-file renders. It needs no config and no run directory, so
// that it works on a file copied into a bug report; it maps the file read-only and never
// writes. Damage is described, not refused, wherever the rest can still be read.
#pragma once

#include <cstdint>
#include <string>
#include <variant>
#include <vector>

#include "base/status.h"

namespace shmipam::tools {

using FieldValue = std::variant<uint64_t, std::string>;

struct Field {
    std::string name;
    FieldValue value;
};

// One non-empty thing in the file: a held lease, a live entry, a non-free slot, a record.
struct FileItem {
    std::string what;     // "lease", "entry", "slot", "record"
    uint64_t number = 0;  // its index in the file (record: its sequence)
    uint64_t offset = 0;  // byte offset in the file
    std::vector<Field> fields;
    std::string damage;  // non-empty: the item is damaged, and this says how
};

struct FileDescription {
    std::string path;
    std::string kind;                        // "index", "block", "journal segment", "checkpoint"
    std::vector<Field> header;               // geometry, identity, counters, as the file has them
    std::vector<std::string> header_damage;  // said at the top (a checksum mismatch, ...)
    std::vector<FileItem> items;
    std::vector<Field> summary;  // counts, including what was skipped
    bool damaged() const;
};

// kDecode when the kind cannot be told, kArenaDamaged when the file is too short or
// inconsistent to read at all, kArenaForeign for a wrong magic, kArenaVersion for another
// version, kIo when it cannot be opened; each message says what is wrong.
Expected<FileDescription> describe_state_file(const std::string& path);

}  // namespace shmipam::tools
