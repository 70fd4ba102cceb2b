#include "cluster/release_due.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>

#include "base/directory.h"
#include "engine/state/replace_file.h"

namespace shmipam::cluster {

namespace {

std::string due_dir(const std::string& dir, const std::string& pool) {
    return dir + "/" + pool + ".release";
}

std::string file_name(const engine::Cidr& block) {
    return block.network().to_string() + "-" + std::to_string(block.prefix);
}

}  // namespace

void write_release_due(const std::string& dir, const std::string& pool, const engine::Cidr& block,
                       uint64_t due_unix_s) {
    const std::string d = due_dir(dir, pool);
    ::mkdir(d.c_str(), 0755);
    // Written whole through a rename: a reader never sees half a number.
    const std::string path = d + "/" + file_name(block);
    // A mark lost to a power cut is made again by the next DEL that empties the block.
    (void)engine::replace_file(path, std::to_string(due_unix_s) + "\n", engine::Replace::kWhole);
}

void remove_release_due(const std::string& dir, const std::string& pool,
                        const engine::Cidr& block) {
    ::unlink((due_dir(dir, pool) + "/" + file_name(block)).c_str());
}

std::vector<ReleaseDue> read_release_due(const std::string& dir, const std::string& pool) {
    std::vector<ReleaseDue> out;
    const std::string d = due_dir(dir, pool);
    (void)base::for_each_entry(d, [&](std::string_view name) {
        const std::string n(name);
        const size_t dash = n.rfind('-');
        if (dash == std::string::npos || n.find(".tmp.") != std::string::npos) return;
        auto block = engine::Cidr::parse(n.substr(0, dash) + "/" + n.substr(dash + 1));
        if (!block) return;
        const int fd = ::open((d + "/" + n).c_str(), O_RDONLY | O_CLOEXEC);
        if (fd < 0) return;
        char buf[32] = {};
        const ssize_t got = ::read(fd, buf, sizeof buf - 1);
        ::close(fd);
        if (got <= 0) return;
        out.push_back({*block, std::strtoull(buf, nullptr, 10)});
    });
    return out;
}

}  // namespace shmipam::cluster
