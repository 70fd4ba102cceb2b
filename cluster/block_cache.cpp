#include "cluster/block_cache.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>

#include "engine/state/replace_file.h"

namespace shmipam::cluster {

std::string block_cache_path(const std::string& dir, const std::string& pool) {
    return dir + "/" + pool + ".blocks";
}

Expected<std::vector<OwnedBlock>> read_block_cache(const std::string& path) {
    std::vector<OwnedBlock> out;
    std::ifstream f(path);
    if (!f) return out;
    std::string line;
    for (int n = 1; std::getline(f, line); ++n) {
        if (line.empty()) continue;
        const size_t space = line.find(' ');
        auto cidr = engine::Cidr::parse(line.substr(0, space));
        if (!cidr || space == std::string::npos) {
            return make_error(Code::kArenaDamaged,
                              "cannot read line " + std::to_string(n) + " of " + path);
        }
        out.push_back({*cidr, std::strtoll(line.c_str() + space + 1, nullptr, 10)});
    }
    return out;
}

Status write_block_cache(const std::string& path, const std::vector<OwnedBlock>& blocks) {
    std::string text;
    for (const OwnedBlock& b : blocks) {
        text += b.cidr.to_string() + " " + std::to_string(b.mod_revision) + "\n";
    }
    // Durable before the helper answers: a power loss must not bring back a list without a
    // block the store gives the node (it would never allocate from it until a refresh).
    return engine::replace_file(path, text, engine::Replace::kDurable);
}

}  // namespace shmipam::cluster
