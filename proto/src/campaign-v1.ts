// campaign.v1 spans two files; each generated file repeats the package's helper names, so the second one's
// messages and service are named here.
export * from './gen/campaign/v1/campaign';
export {
  CreateTemplateRequest,
  DeleteTemplateRequest,
  DeleteTemplateResponse,
  GetTemplateRequest,
  ListTemplatesRequest,
  ListTemplatesResponse,
  Template,
  TemplateInput,
  TemplateServiceClient,
  TemplateServiceService,
  UpdateTemplateRequest,
  type TemplateServiceServer,
} from './gen/campaign/v1/template';
