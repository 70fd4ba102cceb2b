#include "cluster/cluster_identity.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <string>

#include "engine/state/replace_file.h"

namespace shmipam::cluster {

namespace {

std::string hex(uint64_t v) {
    char buf[17];
    std::snprintf(buf, sizeof buf, "%016llx", static_cast<unsigned long long>(v));
    return buf;
}

Status io_error(const std::string& what, const std::string& path) {
    return make_error(Code::kIo, what + " " + path + ": " + std::strerror(errno));
}

}  // namespace

std::string cluster_id_path(const std::string& dir) {
    return dir + "/cluster-id";
}

Status replace_cluster_id(const std::string& dir, uint64_t id) {
    std::error_code ec;
    std::filesystem::create_directories(dir, ec);
    if (ec) return make_error(Code::kIo, "cannot create " + dir + ": " + ec.message());
    return engine::replace_file(cluster_id_path(dir), hex(id) + "\n", engine::Replace::kDurable);
}

bool has_cluster_id(const std::string& dir) {
    return ::access(cluster_id_path(dir).c_str(), F_OK) == 0;
}

Status check_cluster_id(const std::string& dir, uint64_t seen) {
    const std::string path = cluster_id_path(dir);
    std::error_code ec;
    std::filesystem::create_directories(dir, ec);
    if (ec) return make_error(Code::kIo, "cannot create " + dir + ": " + ec.message());
    char buf[64] = {};
    const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        if (errno != ENOENT) return io_error("cannot read", path);
        return engine::replace_file(path, hex(seen) + "\n", engine::Replace::kDurable);
    }
    const ssize_t n = ::read(fd, buf, sizeof buf - 1);
    ::close(fd);
    if (n < 16) return make_error(Code::kIo, "cannot read the cluster id in " + path);
    const std::string remembered(buf, 16);
    if (remembered == hex(seen)) return Ok{};
    return make_error(
        Code::kInvalidConfig,
        "etcd answers as cluster " + hex(seen) +
            ", but this node's blocks were "
            "claimed in cluster " +
            remembered + " (" + path +
            "): refusing to claim "
            "from another cluster, which would give this node's blocks to other nodes "
            "too. If the cluster was replaced on purpose, drain the node, then remove "
            "that file");
}

}  // namespace shmipam::cluster
