// SPDX-License-Identifier: Apache-2.0

/* The public header must compile as strict C99; built with -std=c99
 * -Wall -Wextra -pedantic -Werror. Running it checks the entry point and
 * that the static initialisers give what the *_init functions give, as a
 * C compiler lays them out. */
#include "rknp.h"

#include <stdio.h>
#include <string.h>

/* Static storage: padding bytes are zero, as *_init leaves them. */
static const rknp_config config_init = RKNP_CONFIG_INIT;
static const rknp_forward forward_init = RKNP_FORWARD_INIT;
static const rknp_child_options child_options_init = RKNP_CHILD_OPTIONS_INIT;

int main(void) {
    const rknp_api_v1 *api = (const rknp_api_v1 *)rknp_get_api(RKNP_ABI_MAJOR);
    rknp_config cfg;
    rknp_forward fwd;
    rknp_child_options opts;
    rknp_config automatic = RKNP_CONFIG_INIT;
    if (api == NULL || api->abi_major != RKNP_ABI_MAJOR) return 1;
    memset(&cfg, 0xA5, sizeof cfg);
    memset(&fwd, 0xA5, sizeof fwd);
    memset(&opts, 0xA5, sizeof opts);
    if (rknp_config_init(&cfg, sizeof cfg) != RKNP_OK ||
        rknp_forward_init(&fwd, sizeof fwd) != RKNP_OK ||
        rknp_child_options_init(&opts, sizeof opts) != RKNP_OK)
        return 1;
    if (memcmp(&cfg, &config_init, sizeof cfg) != 0) {
        fprintf(stderr, "RKNP_CONFIG_INIT differs from rknp_config_init\n");
        return 1;
    }
    if (memcmp(&fwd, &forward_init, sizeof fwd) != 0) {
        fprintf(stderr, "RKNP_FORWARD_INIT differs from rknp_forward_init\n");
        return 1;
    }
    if (memcmp(&opts, &child_options_init, sizeof opts) != 0) {
        fprintf(stderr, "RKNP_CHILD_OPTIONS_INIT differs from "
                        "rknp_child_options_init\n");
        return 1;
    }
    if (automatic.struct_size != sizeof automatic || automatic.mtu != 65520 ||
        automatic.udp_path != RKNP_UDP_PATH_DEFAULT)
        return 1;
    printf("%s\n", api->library_version());
    return 0;
}
