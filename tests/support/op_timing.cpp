#include "tests/support/op_timing.h"

#include <algorithm>
#include <stdexcept>
#include <vector>

#include "tests/support/plugin_runner.h"
#include "tests/support/temp_dir.h"

namespace shmipam::testing {

std::chrono::microseconds median_add_time(const nlohmann::json& config,
                                          const std::map<std::string, std::string>& extra_env,
                                          int samples) {
    TempDir scratch;
    nlohmann::json cfg = config;
    cfg["ipam"]["dataDir"] = scratch.sub("data");
    cfg["ipam"]["runDir"] = scratch.sub("run");
    const std::string text = cfg.dump();
    auto call = [&](const std::string& cmd, const std::string& id) {
        auto env = cni_env(cmd, id);
        for (const auto& [k, v] : extra_env) env[k] = v;
        const auto start = std::chrono::steady_clock::now();
        const ProcessResult r = run_plugin(env, text);
        if (r.exit_code != 0) throw std::runtime_error("timing probe " + cmd + " failed: " + r.out);
        return std::chrono::duration_cast<std::chrono::microseconds>(
            std::chrono::steady_clock::now() - start);
    };
    call("ADD", "warm-up");  // the first call creates the state files: not a typical ADD
    std::vector<std::chrono::microseconds> times;
    for (int i = 0; i < samples; ++i) {
        const std::string id = "probe" + std::to_string(i);
        times.push_back(call("ADD", id));
        call("DEL", id);
    }
    std::nth_element(times.begin(), times.begin() + samples / 2, times.end());
    return times[size_t(samples / 2)];
}

}  // namespace shmipam::testing
