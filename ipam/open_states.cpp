#include "ipam/open_states.h"

#include "engine/ops/open_network.h"
#include "engine/state/journal_compaction.h"
#include "ipam/pool_state.h"

namespace shmipam::ipam {

Expected<OpenState> open_state(std::string name, std::unique_ptr<engine::NetworkConfig> cfg) {
    auto store = engine::open_network(*cfg);
    if (!store) return store.error();
    return OpenState{std::move(name), std::move(cfg), std::move(*store)};
}

std::optional<Error> open_every_state(const Request& r, const pools::Catalog& catalog,
                                      std::vector<OpenState>& opened,
                                      const std::vector<std::string>& likely) {
    std::optional<Error> first_error;
    for (const std::string& name : pool_states(r, likely)) {
        auto st = open_state(name, reading_config(r, name, catalog));
        if (st) {
            opened.push_back(std::move(*st));
        } else if (!first_error) {
            first_error = st.error();
        }
    }
    return first_error;
}

Expected<std::vector<Holdings>> find_holdings(const Request& r, const pools::Catalog& catalog,
                                              std::vector<OpenState>& opened,
                                              const std::vector<std::string>& likely) {
    if (auto e = open_every_state(r, catalog, opened, likely)) return *e;
    std::vector<Holdings> out;
    for (OpenState& s : opened) {
        auto held = s.allocator().addresses_of(r.key);
        if (held) {
            out.push_back({s.name, std::move(*held)});
        } else if (held.error().code != Code::kCheckNoAllocation) {
            return held.error();
        }
    }
    return out;
}

void keep_states(Upkeep& upkeep, std::vector<OpenState>& opened) {
    auto kept = std::make_shared<std::vector<OpenState>>(std::move(opened));
    bool due = false;
    for (const OpenState& s : *kept) due = due || (s.store && s.store->compaction_due());
    if (due) {
        upkeep.after_answer = [kept] {
            for (const OpenState& s : *kept) {
                if (s.store && s.store->compaction_due()) engine::compact_journal_if_due(*s.store);
            }
        };
    }
    upkeep.keep_until_exit.push_back(std::move(kept));
}

Expected<size_t> release_fixed_claim(OpenState& s, const engine::ClaimSpec& claim,
                                     const std::string& ifname, bool in_use_too) {
    return s.allocator().release_claim(claim.key, ifname, in_use_too);
}

}  // namespace shmipam::ipam
