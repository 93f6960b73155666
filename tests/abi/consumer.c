// SPDX-License-Identifier: Apache-2.0

/* Built against the *installed* library via pkg-config or CMake's
 * find_package: proves the install layout works for a C consumer. */
#include <rknp.h>

#include <stdio.h>
#include <string.h>

int main(void) {
    rknp_config cfg;
    rknp_parent *p = NULL;
    rknp_error *err = NULL;
    if (rknp_config_init(&cfg, sizeof cfg) != RKNP_OK) return 1;
    cfg.mtu = 1;
    if (rknp_parent_new(&cfg, &p, &err) != RKNP_ERR_INVALID_ARGUMENT) return 1;
    if (strstr(rknp_error_message(err), "mtu") == NULL) return 1;
    rknp_error_free(err);
    printf("rknp %s, ABI %u.%u\n", rknp_library_version(),
           rknp_abi_version() >> 16, rknp_abi_version() & 0xffff);
    return 0;
}
