// SPDX-License-Identifier: Apache-2.0

// The public header must compile as C++ with -Wall -Wextra -pedantic
// -Werror, static initialisers included.
#include "rknp.h"

int main() {
    static_assert(sizeof(rknp_kv) == 2 * sizeof(void *));
    rknp_config cfg = RKNP_CONFIG_INIT;
    rknp_forward fwd = RKNP_FORWARD_INIT;
    rknp_child_options opts = RKNP_CHILD_OPTIONS_INIT;
    if (cfg.struct_size != sizeof cfg || fwd.struct_size != sizeof fwd ||
        opts.struct_size != sizeof opts)
        return 1;
    rknp_parent *p = nullptr;
    if (rknp_parent_new(&cfg, &p, nullptr) != RKNP_OK) return 1;
    rknp_parent_free(p);
    return rknp_get_api(RKNP_ABI_MAJOR) != nullptr ? 0 : 1;
}
