import type { Router } from 'express';
import type { Logger } from '@mail/common';
import type { ServiceClients } from '../clients';

export interface RouteContext {
  clients: ServiceClients;
  logger: Logger;
}

/**
 * A route module adds the handlers of one area of the API. Access control and
 * validation already ran (see app.ts); a handler maps HTTP <-> one gRPC call.
 */
export type RouteModule = (router: Router, context: RouteContext) => void;
