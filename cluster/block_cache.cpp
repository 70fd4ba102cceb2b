#include "cluster/block_cache.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>

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
    const std::string tmp = path + ".tmp." + std::to_string(::getpid());
    const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0) return make_error(Code::kIo, "cannot create " + tmp + ": " + std::strerror(errno));
    const bool ok =
        ::write(fd, text.data(), text.size()) == ssize_t(text.size()) && ::fsync(fd) == 0;
    ::close(fd);
    if (!ok || ::rename(tmp.c_str(), path.c_str()) != 0) {
        ::unlink(tmp.c_str());
        return make_error(Code::kIo, "cannot write " + path + ": " + std::strerror(errno));
    }
    // The rename made durable: a power loss must not bring back a list without a claimed block.
    const std::string dir = path.substr(0, path.rfind('/'));
    if (const int dfd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC); dfd >= 0) {
        ::fsync(dfd);
        ::close(dfd);
    }
    return Ok{};
}

}  // namespace shmipam::cluster
