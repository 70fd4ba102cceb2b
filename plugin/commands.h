// One plugin invocation, from environment and stdin to stdout text and exit status. main() is a
// thin shell over this, so tests can drive the whole CNI surface in-process too.
#pragma once

#include <functional>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"
#include "plugin/cni_env.h"
#include "plugin/invocation_log.h"

namespace shmipam::cni {

struct Invocation {
    std::string stdout_text;  // result or error JSON (never logs)
    std::string log_line;     // for stderr: what went wrong, when something did
    int exit_code = 0;
    // Upkeep to run once the answer is written (journal compaction): a crash there can no
    // longer fail the operation the runtime asked for.
    std::function<void()> after_answer;
    // What the answer was computed with (the mapped state, the pools catalog). A one-shot
    // process exits without tearing them down (serve_invocation): the kernel unmaps and closes
    // everything at exit in one go, where unmapping, closing and freeing them one by one cost
    // an ADD about 0.1 ms here (docs/performance.md, "Exit").
    std::vector<std::shared_ptr<const void>> keep_until_exit;
    // ipam.logFile: where serve_invocation appends the record, once the answer is out.
    std::optional<LogConfig> log;
    InvocationRecord record;
};

// The error answer in `version` (its JSON on stdout, a log line, exit 1), and a success.
Invocation fail(const std::string& version, const Error& e);
Invocation succeed(const nlohmann::json& out);

Invocation run_plugin(const EnvLookup& env, std::string_view stdin_data);

}  // namespace shmipam::cni
