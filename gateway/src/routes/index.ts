import { brandGuideRoutes } from './brand-guides';
import { campaignRoutes } from './campaigns';
import { eventRoutes } from './events';
import { identityRoutes } from './identity';
import { recipientDatabaseRoutes } from './recipient-database';
import { runRoutes } from './runs';
import { suppressionRoutes } from './suppressions';
import { templateRoutes } from './templates';
import type { RouteModule } from './context';

/** Every area of the API; the OpenAPI fragments in gateway/openapi/ describe them. */
export const routeModules: RouteModule[] = [
  campaignRoutes,
  brandGuideRoutes,
  identityRoutes,
  eventRoutes,
  suppressionRoutes,
  templateRoutes,
  runRoutes,
  recipientDatabaseRoutes,
];
