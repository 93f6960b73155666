// SPDX-License-Identifier: Apache-2.0

/* The public header must compile as strict C99; built with -std=c99
 * -Wall -Wextra -pedantic -Werror. Running it checks the entry point. */
#include "rknp.h"

#include <stdio.h>

int main(void) {
    const rknp_api_v1 *api = (const rknp_api_v1 *)rknp_get_api(RKNP_ABI_MAJOR);
    if (api == NULL || api->abi_major != RKNP_ABI_MAJOR) return 1;
    printf("%s\n", api->library_version());
    return 0;
}
