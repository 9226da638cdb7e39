/* The compiled-in providers. */
#include "providers/provider.h"

static const struct sbx_provider *const providers[] = {
	&sbx_provider_local,  &sbx_provider_e2b,	&sbx_provider_daytona,
	&sbx_provider_docker, &sbx_provider_kubernetes, NULL,
};

const struct sbx_provider *sbx_provider_find(const char *name)
{
	for (size_t i = 0; providers[i]; i++)
		if (streq(providers[i]->name, name))
			return providers[i];
	return NULL;
}

const struct sbx_provider *const *sbx_provider_all(void)
{
	return providers;
}
