import type { RouteModule } from './context';

/** Every area of the API; the OpenAPI fragments in gateway/openapi/ describe them. */
export const routeModules: RouteModule[] = [];
