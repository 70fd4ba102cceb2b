// The invocation log (docs/operations.md, "Logs"): with ipam.logFile set, one line per
// invocation (time, level, command, container, pod, interface, network, addresses, result code,
// duration), appended by a single write(2) to a file opened O_APPEND, so that hundreds of
// plugins writing at once never tear or interleave a line; rotated by size under a lock, by
// renames, so that no line is lost to a rotation. Off by default; when off it costs a field
// lookup in the config.
//
// Not spdlog (docs/dependencies.md): its rotating sink counts the size per process and rotates
// without a lock, which loses and misplaces lines when many processes share a file.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "base/status.h"

namespace shmipam::cni {

enum class LogLevel { kError, kInfo, kDebug };

struct LogConfig {
    std::string file;
    LogLevel level = LogLevel::kInfo;
    uint64_t max_bytes = 10u << 20;  // logMaxSizeMB
    int max_files = 3;               // logMaxFiles: rotated files kept (file.1 ... file.N)
};

// ipam.logFile, logLevel, logMaxSizeMB, logMaxFiles of a network config; nullopt when logFile
// is absent. Bad values are config errors (code 7) naming the field.
Expected<std::optional<LogConfig>> read_log_config(const nlohmann::json& config);

struct InvocationRecord {
    std::string command, container_id, pod, ifname, network;
    std::vector<std::string> addresses;
    int code = 0;         // 0, or the CNI error code answered
    std::string message;  // the error's msg
    double duration_ms = 0;
    std::string debug_config;  // at debug: the ipam config, secrets masked
};

// The record's line, '\n'-terminated (and at debug its detail line): logfmt, values with
// spaces or quotes quoted.
std::string format_log_lines(const InvocationRecord& r, LogLevel level, int64_t unix_ms);

// Appends the record when `level` asks for it (error: failures only), then rotates the file if it
// grew past max_bytes. Failing to log never fails the invocation.
void append_invocation_log(const LogConfig& cfg, const InvocationRecord& r);

// The ipam section of `config` with every "password" value masked (for debug lines).
std::string masked_ipam(const nlohmann::json& config);

}  // namespace shmipam::cni
