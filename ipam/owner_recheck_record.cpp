#include "ipam/owner_recheck_record.h"

#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "base/file_lock.h"
#include "engine/state/replace_file.h"

namespace shmipam::ipam {

namespace {

using nlohmann::json;

// Held while a record is read, updated and renamed over: a file of its own, never renamed, so
// that every writer locks the same inode.
constexpr const char* kRecordLockName = ".owner-recheck.lock";
// A holder reads and replaces one small file on tmpfs: a hold of this long is a stuck holder,
// and the outcome goes unrecorded (the recheck itself is done).
constexpr uint64_t kRecordLockWaitMs = 5'000;

std::string record_path(const std::string& run_dir) {
    return run_dir + "/" + kRecheckRecordName;
}

json to_json(const RecheckRecord& r) {
    json j = {{"lastCheck", r.last_check},
              {"lastSuccess", r.last_success},
              {"errorsTotal", r.errors_total},
              {"claimsFreedTotal", r.claims_freed_total},
              {"claimsKeptOnError", r.claims_kept_on_error}};
    if (r.last_error_time != 0) {
        j["lastError"] = {{"time", r.last_error_time}, {"message", r.last_error}};
    }
    return j;
}

std::optional<RecheckRecord> from_json(const json& j) {
    if (!j.is_object()) return std::nullopt;
    RecheckRecord r;
    try {
        r.last_check = j.at("lastCheck").get<int64_t>();
        r.last_success = j.at("lastSuccess").get<int64_t>();
        r.errors_total = j.at("errorsTotal").get<uint64_t>();
        r.claims_freed_total = j.at("claimsFreedTotal").get<uint64_t>();
        r.claims_kept_on_error = j.at("claimsKeptOnError").get<uint64_t>();
        if (auto e = j.find("lastError"); e != j.end()) {
            r.last_error_time = e->at("time").get<int64_t>();
            r.last_error = e->at("message").get<std::string>();
        }
    } catch (const json::exception&) {
        return std::nullopt;
    }
    return r;
}

}  // namespace

Status add_recheck_outcome(const std::string& run_dir, const RecheckOutcome& outcome, int64_t now) {
    auto lock =
        base::FileLock::acquire(run_dir + "/" + kRecordLockName, kRecordLockWaitMs,
                                {"another invocation of this node recording its recheck",
                                 "recording one is a small write on tmpfs: the holder is stuck"});
    if (!lock) return lock.error();
    // A record that is not one (a crash cannot make one: it is renamed over whole) starts afresh.
    auto before = read_recheck_record(run_dir);
    RecheckRecord r = before && *before ? **before : RecheckRecord{};
    r.last_check = now;
    r.claims_freed_total += outcome.claims_freed;
    if (outcome.error) {
        ++r.errors_total;
        r.last_error_time = now;
        r.last_error = *outcome.error;
        if (outcome.walk) r.claims_kept_on_error = outcome.claims_kept_on_error;
    } else {
        r.last_success = now;
        if (outcome.walk) r.claims_kept_on_error = 0;
    }
    // On tmpfs, with the walk's marker: a record lost at a reboot starts again empty.
    return engine::replace_file(record_path(run_dir), to_json(r).dump() + "\n",
                                engine::Replace::kWhole);
}

Expected<std::optional<RecheckRecord>> read_recheck_record(const std::string& run_dir) {
    const std::string path = record_path(run_dir);
    std::ifstream f(path);
    if (!f) return std::optional<RecheckRecord>{};
    std::ostringstream text;
    text << f.rdbuf();
    auto r = from_json(json::parse(text.str(), nullptr, false));
    if (!r) return make_error(Code::kDecode, path + " is not a recheck record");
    return std::optional<RecheckRecord>{std::move(*r)};
}

}  // namespace shmipam::ipam
