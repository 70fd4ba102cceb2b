// What the node's StatefulSet rechecks did (docs/operations.md, "StatefulSet rechecks"): each
// check of claims kept "while the StatefulSet wants the pod" (ipam/owner_claims.h: a DEL's check
// of its pod's claim, or a walk over the node's idle ones) adds its outcome to
// <runDir>/owner-recheck.json, so that a check that keeps failing (a role without statefulsets,
// an API server that cannot be reached) is seen: shmipamctl metrics exports it, and a failed
// check also writes a line to the invocation log. Without this a failure was silent, and its
// claims kept for good.
//
//   {"lastCheck": 1767225600, "lastSuccess": 1767222000, "errorsTotal": 3,
//    "lastError": {"time": 1767225600, "message": "GET https://...: HTTP 403 ..."},
//    "claimsFreedTotal": 5, "claimsKeptOnError": 2}
//
// Times are Unix seconds (0: never). claimsKeptOnError: the idle claims the last walk could not
// check (0 after a walk that could); a DEL's check leaves it as it is.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "base/status.h"

namespace shmipam::ipam {

inline constexpr const char* kRecheckRecordName = "owner-recheck.json";

struct RecheckRecord {
    int64_t last_check = 0;
    int64_t last_success = 0;
    int64_t last_error_time = 0;
    std::string last_error;
    uint64_t errors_total = 0;
    uint64_t claims_freed_total = 0;
    uint64_t claims_kept_on_error = 0;
};

// One check's outcome.
struct RecheckOutcome {
    bool walk = false;                 // a walk (else a DEL's check of its pod's claim)
    std::optional<std::string> error;  // why the sets could not be read; nullopt: they were
    uint64_t claims_freed = 0;
    uint64_t claims_kept_on_error = 0;  // with `error`: the claims it could not check
};

// Adds `outcome`, at `now` (Unix seconds), to the record under `run_dir`: read, updated and
// written aside and renamed over, under the record's lock file (checks run in many processes
// at once; none loses another's count). Failing to record never fails the check.
Status add_recheck_outcome(const std::string& run_dir, const RecheckOutcome& outcome, int64_t now);

// The record under `run_dir`; nullopt when no check ever ran there. A record that is not one
// is an error naming the file.
Expected<std::optional<RecheckRecord>> read_recheck_record(const std::string& run_dir);

}  // namespace shmipam::ipam
