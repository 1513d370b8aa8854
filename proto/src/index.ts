export * as analyticsV1 from './gen/analytics/v1/analytics';
export * as brandguideV1 from './gen/brandguide/v1/brand_guide';
export * as campaignV1 from './campaign-v1';
export * as commonV1Errors from './gen/common/v1/errors';
export * as commonV1Paging from './gen/common/v1/paging';
export * as deliveryV1 from './gen/delivery/v1/delivery';
export * as eventsV1 from './gen/events/v1/engagement_event';
export * as identityV1 from './gen/identity/v1/identity';
