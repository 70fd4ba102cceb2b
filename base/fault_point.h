// Named fault-injection points between the steps of a claim, a release, a recovery and a file
// creation. Compiled in only with SHMIPAM_FAULT_POINTS (the `faults` preset, used by the crash
// tests); in every other build SHMIPAM_FAULT(name) is nothing at all.
//
// A test arms one point (through SHMIPAM_FAULT, which the crash tests' plugin reads:
// tests/support/plugin_under_test_main.cpp; the production plugin and the engine
// never read it); when execution reaches it, after `skip` earlier hits, the
// process dies there: _exit(kFaultExitCode) or SIGKILL, leaving everything as a crash would.
#pragma once

#include <functional>
#include <string_view>

namespace shmipam::faults {

inline constexpr int kFaultExitCode = 77;

enum class Mode { kExit, kKill };

// Every point, so tests can cover them all.
inline constexpr std::string_view kAllPoints[] = {
    "lease.after_cas",              // lease word taken, side fields not stamped
    "add.after_entry_claim",        // entry CLAIMING, fingerprint not stamped
    "add.after_fingerprint",        // entry CLAIMING and stamped, no address yet
    "add.before_slot_claim",        // ref names the candidate, slot not claimed
    "add.after_slot_claim",         // slot CLAIMING by the lease
    "add.before_superseded_check",  // ALLOC records durable, state not yet rechecked
    "add.after_publish",            // the first slot ALLOCATED, entry still CLAIMING
    "add.before_commit",            // every slot ALLOCATED, entry still CLAIMING
    "add.after_commit",             // entry COMMITTED, lease still held
    "del.after_target",             // lease names the entry, entry still COMMITTED
    "del.after_entry_release",      // entry RELEASING, slots ALLOCATED
    "del.after_slot_releasing",     // a slot RELEASING
    "del.after_slot_cooling",       // a slot COOLING, entry still RELEASING
    "del.after_release",            // every slot COOLING, entry not yet retired
    "heal.after_retire",            // a healer retired a CLAIMING entry, slots not rolled back
    "heal.after_slot_rollback",     // a healer rolled back one slot
    "reap.before_free",             // a dead lease's work healed, lease not yet freed
    "retire.after_flag",            // the state marked retired, the index not yet removed
    "journal.after_intent",         // journal intent published in the lease, nothing reserved
    "journal.after_reserve",        // journal records reserved, not written
    "journal.after_sync",           // journal records durable, the transition not yet made
    "compact.after_boundary",       // a compactor chose its boundary, nothing read or written
    "checkpoint.after_publish",     // a checkpoint published, old segments not yet dropped
    "create.after_allocate",        // a state file built aside, not yet initialised
    "create.before_publish",        // a state file initialised aside, not yet linked
};

// The steps a fixed address adds (engine/ops/claims.cpp), reached only by a sticky pod's ADD or
// DEL: tests/crash/claim_crash_test.cpp covers them, with the ADD and DEL points they pass.
inline constexpr std::string_view kClaimPoints[] = {
    "claim.after_claim_commit",     // the name's claim COMMITTED, idle; no sandbox entry yet
    "claim.before_sandbox_commit",  // the sandbox entry CLAIMING, naming the claim
    "claim.after_sandbox_commit",   // the sandbox entry COMMITTED, the claim not yet bound to it
    "claim.before_bind",            // about to CAS the claim's binding word to the sandbox
    "claim.after_unbind",           // a DEL unbound the claim, the sandbox entry still COMMITTED
};
// Steps only the in-process two-actor tests stop at (tests/crash/claim_race_test.cpp): a
// process killed there has changed nothing yet.
inline constexpr std::string_view kClaimRacePoints[] = {
    "claim.before_mark",  // an expiry or an operator's release about to mark a claim expiring
};

// The steps of shmipamctl states remove (tools/state_removal.cpp): a process killed at any of
// them leaves the state whole or removed, and the next `shmipamctl states` finishes it.
inline constexpr std::string_view kStateRemovalPoints[] = {
    "states.after_journal_aside",  // the journal renamed .removing., the arena not yet
    "states.after_arena_aside",    // both renamed, nothing deleted
    "states.after_arena_deleted",  // the arena deleted, the journal not yet
};

#ifdef SHMIPAM_FAULT_POINTS
void arm(std::string_view point, Mode mode, int skip);
// Sleeps this long at every point: widens every window between two steps, so that random kills
// (the storm tests) land inside claims and releases instead of mostly in exec and start-up.
void stretch(int micros);
void hit(std::string_view point);
// In-process two-actor tests (tests/crash/two_actor_test.cpp): `actor` runs at every point this
// process reaches until it is cleared (nullptr), so that a whole operation of a second actor can
// happen at one precise step of the first, deterministically.
using Actor = std::function<void(std::string_view point)>;
void set_actor(Actor actor);
#define SHMIPAM_FAULT(name) ::shmipam::faults::hit(name)
#else
#define SHMIPAM_FAULT(name) ((void)0)
#endif

}  // namespace shmipam::faults
