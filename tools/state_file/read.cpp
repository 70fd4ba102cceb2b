// describe_state_file (read.h): tells the kind of a state file from its name (then its magic,
// when the name says nothing), maps it read-only, and hands it to that kind's describer.
#include <sys/stat.h>

#include <cerrno>
#include <cstring>

#include "shm/format.h"
#include "shm/index_file.h"
#include "shm/mapped_file.h"
#include "tools/state_file/describe.h"

namespace shmipam::tools {

bool FileDescription::damaged() const {
    if (!header_damage.empty()) return true;
    for (const auto& i : items) {
        if (!i.damage.empty()) return true;
    }
    return false;
}

namespace {

enum class Kind { kUnknown, kIndex, kBlock, kSegment, kCheckpoint };

// The decimal number right after `prefix` in `name` (a copy may carry a suffix, "....bak").
bool number_after(const std::string& name, const char* prefix, size_t digits, uint64_t* out) {
    const size_t p = std::strlen(prefix);
    if (name.compare(0, p, prefix) != 0 || name.size() < p + digits) return false;
    const std::string num = name.substr(p, digits);
    if (num.find_first_not_of("0123456789") != std::string::npos) return false;
    *out = std::stoull(num);
    return true;
}

Kind kind_from_name(const std::string& name, uint64_t* number) {
    if (name == shm::IndexFile::kFileName || name.rfind(std::string("index."), 0) == 0)
        return Kind::kIndex;
    if (name.size() > 4 && name.compare(name.size() - 4, 4, ".blk") == 0) return Kind::kBlock;
    if (number_after(name, format::kJournalPrefix, 8, number)) return Kind::kSegment;
    if (number_after(name, format::kCheckpointPrefix, 16, number)) return Kind::kCheckpoint;
    return Kind::kUnknown;
}

}  // namespace

Expected<FileDescription> describe_state_file(const std::string& path) {
    struct stat sb {};
    if (::stat(path.c_str(), &sb) != 0) {
        return make_error(Code::kIo, "cannot read " + path + ": " + std::strerror(errno));
    }
    if (!S_ISREG(sb.st_mode)) return make_error(Code::kIo, path + " is not a regular file");
    if (sb.st_size == 0) {
        return make_error(Code::kArenaDamaged, path + " is empty: no state file is ever empty");
    }
    auto mapped = shm::MappedFile::open(path, shm::Access::kReadOnly);
    if (!mapped) return mapped.error();
    const std::span<const std::byte> bytes(mapped->data(), mapped->size());

    const size_t slash = path.rfind('/');
    const std::string name = slash == std::string::npos ? path : path.substr(slash + 1);
    uint64_t number = 0;
    Kind kind = kind_from_name(name, &number);
    if (kind == Kind::kUnknown && bytes.size() >= sizeof format::kIndexMagic) {
        // A renamed arena still says what it is; a renamed journal file does not (no header).
        if (std::memcmp(bytes.data(), format::kIndexMagic, 8) == 0) kind = Kind::kIndex;
        if (std::memcmp(bytes.data(), format::kBlockMagic, 8) == 0) kind = Kind::kBlock;
    }
    Expected<FileDescription> d = make_error(Code::kDecode, "");
    switch (kind) {
        case Kind::kIndex:
            d = state_file::describe_index(bytes);
            break;
        case Kind::kBlock:
            d = state_file::describe_block(bytes);
            break;
        case Kind::kSegment:
            d = state_file::describe_segment(bytes, number);
            break;
        case Kind::kCheckpoint:
            d = state_file::describe_checkpoint(bytes, number);
            break;
        case Kind::kUnknown:
            return make_error(Code::kDecode,
                              "cannot tell what " + path + " is: its name is not index, *.blk, " +
                                  format::kJournalPrefix + "NNNNNNNN or " +
                                  format::kCheckpointPrefix +
                                  "<16 digits>, and it does not start with an arena's magic");
    }
    if (!d) return make_error(d.error().code, path + ": " + d.error().msg);
    d->path = path;
    return d;
}

}  // namespace shmipam::tools
