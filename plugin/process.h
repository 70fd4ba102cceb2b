// One CNI invocation as a process: reads CNI_COMMAND and the rest of the environment and stdin,
// runs it (plugin/commands.h), logs to stderr, prints the answer on stdout, then runs what comes
// after the answer, and exits with the status. plugin/main.cpp is this and nothing else; the
// crash tests' plugin (tests/support/plugin_under_test_main.cpp) is this with its instruments.
#pragma once

#include <functional>
#include <string>

namespace shmipam::cni {

struct ProcessHooks {
    // Before the invocation touches any state; and once it succeeded, before its answer is
    // printed (a runtime knows the outcome from then on).
    std::function<void(const std::string&command, const std::string&container_id)> began, answering;
};

// Exits the process with the invocation's status once its answer is written and its upkeep
// done, leaving what it mapped and allocated to the kernel (Invocation::keep_until_exit).
[[noreturn]] void serve_invocation(const ProcessHooks& hooks = {});

}  // namespace shmipam::cni
