#include "plugin/invocation_log.h"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cmath>
#include <cstdio>
#include <ctime>

#include "base/write_all.h"

namespace shmipam::cni {

using nlohmann::json;

namespace {

Error bad(const std::string& field, const std::string& why) {
    return make_error(Code::kInvalidConfig, "ipam." + field + " " + why);
}

// A logfmt value: bare when it has no space, quote, '=' or control character; else quoted with
// '"' and '\' escaped and newlines as \n.
std::string value(const std::string& v) {
    bool plain = !v.empty();
    for (char c : v) plain = plain && c > ' ' && c != '"' && c != '=' && c != '\\' && c != 0x7f;
    if (plain) return v;
    std::string out = "\"";
    for (char c : v) {
        if (c == '"' || c == '\\') out += '\\';
        if (c == '\n') {
            out += "\\n";
        } else if (static_cast<unsigned char>(c) < ' ') {
            out += ' ';
        } else {
            out += c;
        }
    }
    return out + "\"";
}

// Every "password" value, whatever its type (the config is not validated yet at debug), and the
// user:password@ of every URL.
void mask_passwords(json& j) {
    if (j.is_object()) {
        for (auto& [k, v] : j.items()) {
            if (k == "password") {
                v = "***";
            } else {
                mask_passwords(v);
            }
        }
    } else if (j.is_array()) {
        for (auto& v : j) mask_passwords(v);
    } else if (j.is_string()) {
        const std::string s = j.get<std::string>();
        const size_t scheme = s.find("://");
        const size_t at = scheme == std::string::npos ? s.npos : s.find('@', scheme + 3);
        const size_t slash = scheme == std::string::npos ? s.npos : s.find('/', scheme + 3);
        if (at != std::string::npos && (slash == std::string::npos || at < slash)) {
            j = s.substr(0, scheme + 3) + "***@" + s.substr(at + 1);
        }
    }
}

// file -> file.1 -> ... -> file.N (the oldest dropped), by one writer at a time (a lock file
// beside it), and only if the file is still the one this writer found too big (another writer
// may have rotated it meanwhile). Writers holding the old file open finish their line in
// file.1: nothing is lost.
void rotate(const LogConfig& cfg, const struct stat& written) {
    const std::string lock_path = cfg.file + ".lock";
    const int lock = ::open(lock_path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0640);
    if (lock < 0) return;
    if (::flock(lock, LOCK_EX | LOCK_NB) == 0) {
        struct stat now {};
        if (::stat(cfg.file.c_str(), &now) == 0 && now.st_ino == written.st_ino &&
            now.st_dev == written.st_dev && uint64_t(now.st_size) >= cfg.max_bytes) {
            for (int i = cfg.max_files - 1; i >= 1; --i) {
                const std::string from = cfg.file + "." + std::to_string(i);
                ::rename(from.c_str(), (cfg.file + "." + std::to_string(i + 1)).c_str());
            }
            ::rename(cfg.file.c_str(), (cfg.file + ".1").c_str());
        }
    }
    ::close(lock);  // releases the lock
}

}  // namespace

Expected<std::optional<LogConfig>> read_log_config(const json& config) {
    const auto ipam = config.find("ipam");
    if (ipam == config.end() || !ipam->is_object()) return std::optional<LogConfig>{};
    const auto file = ipam->find("logFile");
    if (file == ipam->end() || file->is_null()) return std::optional<LogConfig>{};
    LogConfig c;
    if (!file->is_string() || file->get<std::string>().empty() ||
        file->get<std::string>()[0] != '/') {
        return bad("logFile", "must be an absolute path (e.g. \"/var/log/shmipam/shmipam.log\")");
    }
    c.file = file->get<std::string>();
    if (auto l = ipam->find("logLevel"); l != ipam->end() && !l->is_null()) {
        const std::string s = l->is_string() ? l->get<std::string>() : "";
        if (s == "error") {
            c.level = LogLevel::kError;
        } else if (s == "info") {
            c.level = LogLevel::kInfo;
        } else if (s == "debug") {
            c.level = LogLevel::kDebug;
        } else {
            return bad("logLevel", "must be \"error\", \"info\" or \"debug\", not " + l->dump());
        }
    }
    if (auto m = ipam->find("logMaxSizeMB"); m != ipam->end() && !m->is_null()) {
        if (!m->is_number() || !(m->get<double>() > 0) || m->get<double>() > 1e6) {
            return bad("logMaxSizeMB", "must be a number of megabytes above 0, not " + m->dump());
        }
        c.max_bytes = uint64_t(std::ceil(m->get<double>() * (1u << 20)));
    }
    if (auto n = ipam->find("logMaxFiles"); n != ipam->end() && !n->is_null()) {
        if (!n->is_number_integer() || n->get<int64_t>() < 1 || n->get<int64_t>() > 100) {
            return bad("logMaxFiles", "must be a whole number from 1 to 100, not " + n->dump());
        }
        c.max_files = int(n->get<int64_t>());
    }
    return std::optional<LogConfig>{c};
}

std::string masked_ipam(const json& config) {
    json ipam = config.contains("ipam") ? config["ipam"] : json::object();
    mask_passwords(ipam);
    return ipam.dump();
}

std::string format_log_lines(const InvocationRecord& r, LogLevel level, int64_t unix_ms) {
    const time_t secs = time_t(unix_ms / 1000);
    struct tm t {};
    ::gmtime_r(&secs, &t);
    char when[40];
    std::snprintf(when, sizeof when, "%04d-%02d-%02dT%02d:%02d:%02d.%03dZ", t.tm_year + 1900,
                  t.tm_mon + 1, t.tm_mday, t.tm_hour, t.tm_min, t.tm_sec, int(unix_ms % 1000));
    std::string addresses;
    for (const auto& a : r.addresses) addresses += (addresses.empty() ? "" : ",") + a;
    char duration[32];
    std::snprintf(duration, sizeof duration, "%.3f", r.duration_ms);
    std::string line = "time=" + std::string(when) + " level=" + (r.code == 0 ? "info" : "error") +
                       " cmd=" + value(r.command) + " container=" + value(r.container_id) +
                       " pod=" + value(r.pod) + " ifname=" + value(r.ifname) +
                       " network=" + value(r.network) + " addresses=" + value(addresses) +
                       " code=" + std::to_string(r.code) + " duration_ms=" + duration;
    if (!r.message.empty()) line += " msg=" + value(r.message);
    line += "\n";
    if (level == LogLevel::kDebug && !r.debug_config.empty()) {
        line += "time=" + std::string(when) + " level=debug cmd=" + value(r.command) +
                " container=" + value(r.container_id) + " ipam=" + value(r.debug_config) + "\n";
    }
    return line;
}

void append_invocation_log(const LogConfig& cfg, const InvocationRecord& r) {
    if (cfg.level == LogLevel::kError && r.code == 0) return;
    timespec now{};
    ::clock_gettime(CLOCK_REALTIME, &now);
    const std::string text =
        format_log_lines(r, cfg.level, int64_t(now.tv_sec) * 1000 + now.tv_nsec / 1000000);
    // Never through a symlink, never into anything but a regular file: the plugin runs as root.
    const int fd =
        ::open(cfg.file.c_str(), O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0640);
    if (fd < 0) return;
    struct stat kind {};
    if (::fstat(fd, &kind) != 0 || !S_ISREG(kind.st_mode)) {
        ::close(fd);
        return;
    }
    // One write: O_APPEND places it whole at the end, never interleaved with another writer's.
    write_all(fd, text);
    struct stat st {};
    const bool too_big = ::fstat(fd, &st) == 0 && uint64_t(st.st_size) >= cfg.max_bytes;
    ::close(fd);
    if (too_big) rotate(cfg, st);
}

}  // namespace shmipam::cni
