#include "plugin/process.h"

#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <optional>

#include "plugin/commands.h"

namespace shmipam::cni {
namespace {

// A config is a few hundred bytes: read through a page of stack that the calls after it use
// anyway. (A 64 KiB buffer here faulted in a stack page of its own at every exec, and reading
// into a 4 KiB string a page of heap.)
std::string read_all_stdin() {
    std::string data;
    char buf[4096];
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

std::optional<std::string> env(const char* name) {
    const char* v = std::getenv(name);
    if (v == nullptr) return std::nullopt;
    return std::string(v);
}

}  // namespace

void serve_invocation(const ProcessHooks& hooks) {
    const std::string command = env("CNI_COMMAND").value_or("");
    // VERSION needs no stdin: do not wait for one that may never close.
    const std::string input = command == "VERSION" ? std::string() : read_all_stdin();
    const std::string container_id = env("CNI_CONTAINERID").value_or("");
    if (hooks.began) hooks.began(command, container_id);
    Invocation inv = run_plugin([](const char* name) { return env(name); }, input);
    if (inv.exit_code == 0 && hooks.answering) hooks.answering(command, container_id);
    if (!inv.log_line.empty()) write_all(STDERR_FILENO, inv.log_line + "\n");
    write_all(STDOUT_FILENO, inv.stdout_text);
    if (inv.after_answer) inv.after_answer();
    // Every lease is released and every record written by now (the operations did both before
    // returning): what is left is unmapping, closing and freeing, which exit does at once.
    std::fflush(nullptr);
    ::_exit(inv.exit_code);
}

}  // namespace shmipam::cni
