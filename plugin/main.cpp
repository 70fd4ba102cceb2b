// shmipam: the CNI IPAM plugin binary. Reads the environment and stdin, prints the result or
// error JSON on stdout, logs to stderr, exits.
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <string>

#include "plugin/commands.h"

namespace {

std::string read_all_stdin() {
    std::string data;
    char buf[65536];
    for (;;) {
        ssize_t n = ::read(STDIN_FILENO, buf, sizeof buf);
        if (n > 0) {
            data.append(buf, size_t(n));
        } else if (n == 0 || errno != EINTR) {
            break;
        }
    }
    return data;
}

void write_all(int fd, const std::string& s) {
    size_t off = 0;
    while (off < s.size()) {
        ssize_t n = ::write(fd, s.data() + off, s.size() - off);
        if (n <= 0) {
            if (n < 0 && errno == EINTR) continue;
            return;
        }
        off += size_t(n);
    }
}

}  // namespace

#ifdef SHMIPAM_FAULT_POINTS
#include "base/fault_point.h"
#include "base/storage_trace.h"

// Test builds only: SHMIPAM_FAULT=<point> [SHMIPAM_FAULT_MODE=kill] [SHMIPAM_FAULT_SKIP=n],
// SHMIPAM_STORAGE_TRACE=<file> (base/storage_trace.h).
void arm_fault_from_env() {
    if (const char* us = std::getenv("SHMIPAM_FAULT_STRETCH_US")) {
        shmipam::faults::stretch(std::atoi(us));
    }
    if (const char* trace = std::getenv("SHMIPAM_STORAGE_TRACE"); trace != nullptr && *trace) {
        shmipam::storage_trace::open(trace);
    }
    const char* point = std::getenv("SHMIPAM_FAULT");
    if (point == nullptr || *point == '\0') return;
    const char* mode = std::getenv("SHMIPAM_FAULT_MODE");
    const char* skip = std::getenv("SHMIPAM_FAULT_SKIP");
    shmipam::faults::arm(point,
                         mode != nullptr && std::string(mode) == "kill"
                             ? shmipam::faults::Mode::kKill
                             : shmipam::faults::Mode::kExit,
                         skip != nullptr ? std::atoi(skip) : 0);
}
#endif

int main() {
#ifdef SHMIPAM_FAULT_POINTS
    arm_fault_from_env();
#endif
    auto env = [](const char* name) -> std::optional<std::string> {
        const char* v = std::getenv(name);
        if (v == nullptr) return std::nullopt;
        return std::string(v);
    };
    // VERSION needs no stdin: do not wait for one that may never close.
    const char* cmd = std::getenv("CNI_COMMAND");
    const bool version = cmd != nullptr && std::string(cmd) == "VERSION";
    const std::string input = version ? std::string() : read_all_stdin();
#ifdef SHMIPAM_FAULT_POINTS
    const std::string traced_cmd = cmd != nullptr ? cmd : "";
    const std::string traced_id = env("CNI_CONTAINERID").value_or("");
    SHMIPAM_TRACE(began(traced_cmd, traced_id));
#endif
    shmipam::cni::Invocation inv = shmipam::cni::run_plugin(env, input);
#ifdef SHMIPAM_FAULT_POINTS
    if (inv.exit_code == 0) SHMIPAM_TRACE(answering(traced_cmd, traced_id));
#endif
    if (!inv.log_line.empty()) write_all(STDERR_FILENO, inv.log_line + "\n");
    write_all(STDOUT_FILENO, inv.stdout_text);
    if (inv.after_answer) inv.after_answer();
    return inv.exit_code;
}
