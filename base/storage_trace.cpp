#include "base/storage_trace.h"

#ifdef SHMIPAM_FAULT_POINTS
#include <fcntl.h>
#include <unistd.h>

#include <atomic>

namespace shmipam::storage_trace {
namespace {
int trace_fd = -1;
std::string trace_path;
std::atomic<uint64_t> saved_count{0};

void emit(const std::string& line) {
    if (trace_fd < 0) return;
    const std::string l = line + "\n";
    (void)::write(trace_fd, l.data(), l.size());  // one write: O_APPEND keeps lines whole
}
}  // namespace

void open(const std::string& path) {
    trace_path = path;
    trace_fd = ::open(path.c_str(), O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0644);
}

void write(const std::string& path, uint64_t offset, uint64_t length) {
    emit("W " + path + " " + std::to_string(offset) + " " + std::to_string(length));
}

void synced(const std::string& path) {
    emit("S " + path);
}

void created(const std::string& path) {
    emit("C " + path);
}

void dir_synced(const std::string& dir) {
    emit("D " + dir);
}

void began(const std::string& command, const std::string& container_id) {
    emit("B " + command + " " + container_id);
}

void answering(const std::string& command, const std::string& container_id) {
    emit("A " + command + " " + container_id);
}

void unlinking(const std::string& path) {
    if (trace_fd < 0) return;
    // Saved under a name no other process uses, so a power cut can bring the file back.
    const std::string saved = trace_path + ".saved." + std::to_string(::getpid()) + "." +
                              std::to_string(saved_count.fetch_add(1));
    if (::link(path.c_str(), saved.c_str()) != 0) return;  // already gone: nothing to restore
    emit("U " + path + " " + saved);
}

}  // namespace shmipam::storage_trace
#endif
