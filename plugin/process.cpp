#include "plugin/process.h"

#include <time.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <optional>

#include "base/write_all.h"
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

double ms_since(const timespec& started) {
    timespec now{};
    ::clock_gettime(CLOCK_MONOTONIC, &now);
    return double(now.tv_sec - started.tv_sec) * 1e3 + double(now.tv_nsec - started.tv_nsec) / 1e6;
}

// The record's outcome, from the answer itself (so it says what the runtime was told).
void complete_record(InvocationRecord& r, const Invocation& inv) {
    const nlohmann::json answer = nlohmann::json::parse(inv.stdout_text, nullptr, false);
    if (!answer.is_object()) return;
    if (inv.exit_code != 0) {
        r.code = answer.value("code", inv.exit_code);
        r.message = answer.value("msg", "");
        return;
    }
    if (auto ips = answer.find("ips"); ips != answer.end() && ips->is_array()) {
        for (const auto& ip : *ips) {
            if (ip.is_object() && ip.contains("address") && ip["address"].is_string()) {
                r.addresses.push_back(ip["address"]);
            }
        }
    }
}

std::optional<std::string> env(const char* name) {
    const char* v = std::getenv(name);
    if (v == nullptr) return std::nullopt;
    return std::string(v);
}

}  // namespace

void serve_invocation(const ProcessHooks& hooks) {
    timespec started{};
    ::clock_gettime(CLOCK_MONOTONIC, &started);
    const std::string command = env("CNI_COMMAND").value_or("");
    // VERSION needs no stdin: do not wait for one that may never close.
    const std::string input = command == "VERSION" ? std::string() : read_all_stdin();
    const std::string container_id = env("CNI_CONTAINERID").value_or("");
    if (hooks.began) hooks.began(command, container_id);
    Invocation inv = run_plugin([](const char* name) { return env(name); }, input);
    if (inv.exit_code == 0 && hooks.answering) hooks.answering(command, container_id);
    if (!inv.log_line.empty()) write_all(STDERR_FILENO, inv.log_line + "\n");
    if (inv.log) inv.record.duration_ms = ms_since(started);
    write_all(STDOUT_FILENO, inv.stdout_text);
    // Logged once the runtime has its answer (it still waits for the exit: docs/operations.md).
    if (inv.log) {
        complete_record(inv.record, inv);
        append_invocation_log(*inv.log, inv.record);
    }
    if (inv.after_answer) inv.after_answer();
    // Every lease is released and every record written by now (the operations did both before
    // returning): what is left is unmapping, closing and freeing, which exit does at once.
    std::fflush(nullptr);
    ::_exit(inv.exit_code);
}

}  // namespace shmipam::cni
